#!/usr/bin/env bash
# Call 89 (session 18; call 88 ran masters-call88.sh and timed out: --steps 30 runs end
# with samples and a checkpoint, 80 s each; here --stop-after, results tarred after each job), on a 4-GPU kind, from the packed folder (copy into .gpu/): ZeRO's
# sharded f32 masters (zero1::masters, train's default for zero1 and zero2 above one rank).
# A. xl bf16 w4, 30 steps, one GEMM table: zero1 and zero2 with sharded masters against
#    ZERO1_MASTERS=whole: every loss and norm equal, bit for bit?
# B. checkpoints: zero1 (sharded masters) saves at step 10 and 20, stops at 20; resumed to
#    30 as zero1 w4 (equal to A's straight run from step 21 on?), as bucketed:25 w4, and
#    as zero1 w2 (16 rows a GPU).
# C. peaks and steps: bench single --clip 1; xl single w1; zero1 (default and adamw:2),
#    zero2 at w4; 6.7B zero1 and zero2 at w4, zero2 at w2. Results under $OUT/c.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R=/tmp/c89; rm -rf "$R"; mkdir -p "$R"; O="${OUT:-/tmp/out}"; mkdir -p "$O"
pack() { tar czf "$O/c.tgz" -C /tmp c89; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$R/gpu.txt"
D=/tmp/dnext; bin/train prepare --data "$D" > /dev/null 2>&1
vocab="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$D/meta.json")"
T="$R/gemm.json"
ms() { python3 -c "
import json,statistics,sys
t=[json.loads(l) for l in open(sys.argv[1]+'/log.jsonl') if '\"train\"' in l]
print(round(int(sys.argv[2])*128/statistics.median(r['tokens_per_s'] for r in t if r['step']>=6)*1e3,3))" "$1" "$2"; }
# train NAME OUT MODEL WORLD STRATEGY GLOBAL STOP [extra args...]; env through ENVS.
train() {
  local n=$1 out=$2 m=$3 w=$4 st=$5 g=$6 k=$7; shift 7
  local t0=$(date +%s)
  env $ENVS timeout 120 bin/comm-launch --nproc-per-node $w -- bin/train run --data "$D" --out "$out" --model $m --bf16 \
    --global-batch $g --steps 100000 --stop-after $k --eval-every 100000 --strategy $st --backend nccl --no-progress \
    $([ -f "$T" ] && [ $m = xl ] && echo --gemm-choices "$T") "$@" > "$R/$n.txt" 2>&1 \
    || { echo "$n failed ($(( $(date +%s) - t0 )) s)"; tail -4 "$R/$n.txt"; pack; return 1; }
  [ -f "$T" ] || [ $m != xl ] || cp "$out/gemm-choices.json" "$T"
  cp "$out/log.jsonl" "$R/$n.log.jsonl"
  echo "$n ($(( $(date +%s) - t0 )) s): $(ms "$out" $g) ms; $(grep -h 'peak GPU memory' "$R/$n.txt" | sort | tail -1 | cut -c1-300)"
  grep -h "masters sharded" "$R/$n.txt" | head -1; pack
}
same() { python3 - "$R/$1.log.jsonl" "$R/$2.log.jsonl" "${3:-0}" <<'PY'
import json,sys
def rec(p): return {r['step']:(r['loss'],r.get('grad_norm')) for r in map(json.loads,open(p)) if r.get('type')=='train'}
a,b,lo=rec(sys.argv[1]),rec(sys.argv[2]),int(sys.argv[3])
common=sorted(s for s in a if s in b and s>lo)
diff=[s for s in common if a[s]!=b[s]]
print(f"{sys.argv[1].split('/')[-1]} vs {sys.argv[2].split('/')[-1]}: {len(common)} steps after {lo}, {'ALL EQUAL' if not diff else 'differ from step %d: %s vs %s'%(diff[0],a[diff[0]],b[diff[0]])}")
PY
}
echo "== A"
ENVS="" train single-xl-w1 /tmp/c xl 1 single 8 30 --fresh --ckpt-every 100000
ENVS="ZERO1_MASTERS=whole" train zero1-whole /tmp/a1 xl 4 zero1 32 30 --fresh --ckpt-every 100000
ENVS="" train zero1-sharded /tmp/a2 xl 4 zero1 32 30 --fresh --ckpt-every 100000
same zero1-whole zero1-sharded
ENVS="ZERO1_MASTERS=whole" train zero2-whole /tmp/a3 xl 4 zero2 32 20 --fresh --ckpt-every 100000
ENVS="" train zero2-sharded /tmp/a4 xl 4 zero2 32 20 --fresh --ckpt-every 100000
same zero2-whole zero2-sharded
echo "== B"
ENVS="" train ck-first /tmp/b xl 4 zero1 32 20 --fresh --ckpt-every 10
for s in "zero1 4" "bucketed:25 4"; do set -- $s
  rm -rf /tmp/b2; cp -r /tmp/b /tmp/b2
  ENVS="" train "ck-resume-${1%%:*}-w$2" /tmp/b2 xl $2 $1 32 30 --ckpt-every 100000
  grep -h "resum" "$R/ck-resume-${1%%:*}-w$2.txt" | head -2 | cut -c1-200
done
same zero1-sharded ck-resume-zero1-w4 20
same zero1-sharded ck-resume-bucketed-w4 20
echo "== C"
timeout 100 bin/bench single --size xl --dtype bf16 --mode step --batch 8 --vocab "$vocab" --warmup 5 --steps 35 \
  --gemm-choices "$T" --clip 1 --out "$R/results.jsonl" | tail -1; pack
ENVS="ZERO1_PARAM_GATHER=adamw:2" train zero1-xl-w4-adamw2 /tmp/c xl 4 zero1 32 30 --fresh --ckpt-every 100000
ENVS="" train zero1-6.7B-w4 /tmp/c 6.7B 4 zero1 32 14 --fresh --ckpt-every 100000
ENVS="" train zero2-6.7B-w4 /tmp/c 6.7B 4 zero2 32 14 --fresh --ckpt-every 100000
ENVS="" train zero2-6.7B-w2 /tmp/c 6.7B 2 zero2 16 14 --fresh --ckpt-every 100000
rm -rf /tmp/a? /tmp/b /tmp/b2 /tmp/c "$D"; echo "=== end ($(date -u +%T))"; pack

#!/usr/bin/env bash
# Call 90 (session 19), on a 4-GPU kind, from the packed folder (copy into .gpu/): the
# first GPU run of `--strategy fsdp`, and sharded masters checked bit for bit.
# 0. model-check's graph-memory probe: does a captured graph reuse what it frees?
# A. xl bf16 w4, one GEMM table: zero2 with ZERO1_MASTERS=sharded against whole masters,
#    and fsdp against zero2 sharded (fsdp gathers the same bf16 bits): equal bit for bit?
#    fsdp --eager: its peak.
# B. 6.7B bf16 w4: fsdp captured and --eager: step and peak (FSDP2: 208.6 ms, 26.4 GiB in
#    call 86, another call: no ratio from it).
# C. checkpoints: fsdp saves at step 10, resumed to 20 as zero1 w4: equal to A's fsdp?
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R=/tmp/c90; rm -rf "$R"; mkdir -p "$R"; O="${OUT:-/tmp/out}"; mkdir -p "$O"
pack() { tar czf "$O/c.tgz" -C /tmp c90; }
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
  env $ENVS timeout ${TMO:-120} bin/comm-launch --nproc-per-node $w -- bin/train run --data "$D" --out "$out" --model $m --bf16 \
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
echo "== 0"
timeout 60 bin/bench model-check 2>&1 | grep "graph memory" | tee "$R/probe.txt"; pack
echo "== A"
ENVS="ZERO1_MASTERS=whole" train zero2-whole /tmp/a1 xl 4 zero2 32 20 --fresh --ckpt-every 100000
ENVS="ZERO1_MASTERS=sharded" train zero2-sharded /tmp/a2 xl 4 zero2 32 20 --fresh --ckpt-every 100000
same zero2-whole zero2-sharded
ENVS="" train fsdp-xl /tmp/a3 xl 4 fsdp 32 20 --fresh --ckpt-every 100000
same zero2-sharded fsdp-xl
ENVS="" train fsdp-xl-eager /tmp/a4 xl 4 fsdp 32 12 --fresh --ckpt-every 100000 --eager
echo "== B"
ENVS="" TMO=200 train fsdp-6.7B /tmp/b1 6.7B 4 fsdp 32 14 --fresh --ckpt-every 100000
ENVS="" TMO=200 train fsdp-6.7B-eager /tmp/b2 6.7B 4 fsdp 32 10 --fresh --ckpt-every 100000 --eager
echo "== C"
ENVS="" train ck-fsdp /tmp/c1 xl 4 fsdp 32 10 --fresh --ckpt-every 10
ENVS="" train ck-resume-zero1 /tmp/c1 xl 4 zero1 32 20 --ckpt-every 100000
same fsdp-xl ck-resume-zero1 10
rm -rf /tmp/a? /tmp/b? /tmp/c? "$D"; echo "=== end ($(date -u +%T))"; pack

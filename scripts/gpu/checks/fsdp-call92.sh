#!/usr/bin/env bash
# Call 92 (session 19), on a 4-GPU kind, from the packed folder (copy into .gpu/):
# sharded f32 masters now train's default for zero1 and zero2 above one rank; fsdp's gathers.
# A. xl bf16 w4, one GEMM table: zero1 sharded (default) against ZERO1_MASTERS=whole, bit for
#    bit?; zero2; fsdp (bit for bit as zero2?), FSDP_PREFETCH=2, FSDP_RESHARD_AFTER_FORWARD=0.
# B. checkpoints, small bf16, one GEMM table: fsdp w4 saves at step 10; resumed as zero1 w4
#    (sharded masters) to 20: bit for bit as a straight zero1 w4 run?; then as zero1 w2 to
#    25 and bucketed:25 w1 to 30 (4 -> 2 -> 1).
# W=2 (when no 4-GPU kind is lent): world 2 in A and B, 16 rows a step, no C.
# C. 6.7B bf16 w4: zero1 and zero2 (sharded masters): steps and peaks, for the plan.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
W=${W:-4}; G=$((8 * W)); R=/tmp/c92; rm -rf "$R"; mkdir -p "$R"; O="${OUT:-/tmp/out}"; mkdir -p "$O"
pack() { tar czf "$O/c.tgz" -C /tmp c92; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$R/gpu.txt"
D=/tmp/dnext; bin/train prepare --data "$D" > /dev/null 2>&1
vocab="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$D/meta.json")"
ms() { python3 -c "
import json,statistics,sys
t=[json.loads(l) for l in open(sys.argv[1]+'/log.jsonl') if '\"train\"' in l]
print(round(int(sys.argv[2])*128/statistics.median(r['tokens_per_s'] for r in t if r['step']>=6)*1e3,3))" "$1" "$2"; }
# train NAME OUT MODEL WORLD STRATEGY GLOBAL STOP [extra args...]; env through ENVS.
train() {
  local n=$1 out=$2 m=$3 w=$4 st=$5 g=$6 k=$7; shift 7
  local t0=$(date +%s) T="$R/gemm-$m.json"
  env $ENVS timeout ${TMO:-120} bin/comm-launch --nproc-per-node $w -- bin/train run --data "$D" --out "$out" --model $m --bf16 \
    --global-batch $g --steps 100000 --stop-after $k --eval-every 100000 --strategy $st --backend nccl --no-progress \
    $([ -f "$T" ] && echo --gemm-choices "$T") "$@" > "$R/$n.txt" 2>&1 \
    || { echo "$n failed ($(( $(date +%s) - t0 )) s)"; tail -4 "$R/$n.txt"; pack; return 1; }
  [ -f "$T" ] || [ ! -f "$out/gemm-choices.json" ] || cp "$out/gemm-choices.json" "$T"
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
ENVS="" train zero1-xl /tmp/a0 xl $W zero1 $G 20 --fresh --ckpt-every 100000
ENVS="ZERO1_MASTERS=whole" train zero1-whole-xl /tmp/a1 xl $W zero1 $G 20 --fresh --ckpt-every 100000
same zero1-whole-xl zero1-xl
ENVS="" train zero2-xl /tmp/a2 xl $W zero2 $G 20 --fresh --ckpt-every 100000
ENVS="" train fsdp-xl /tmp/a3 xl $W fsdp $G 20 --fresh --ckpt-every 100000
same zero2-xl fsdp-xl
ENVS="FSDP_PREFETCH=2" train fsdp2ahead-xl /tmp/a4 xl $W fsdp $G 20 --fresh --ckpt-every 100000
same zero2-xl fsdp2ahead-xl
ENVS="FSDP_RESHARD_AFTER_FORWARD=0" train fsdpkeep-xl /tmp/a5 xl $W fsdp $G 20 --fresh --ckpt-every 100000
same zero2-xl fsdpkeep-xl
rm -rf /tmp/a?
echo "== B"
ENVS="" train s-straight /tmp/b0 small $W zero1 $G 20 --fresh --ckpt-every 100000
ENVS="" train s-ck /tmp/b1 small $W fsdp $G 10 --fresh --ckpt-every 10
ENVS="" train s-resume-zero1-w4 /tmp/b1 small $W zero1 $G 20 --ckpt-every 100000
grep -h "resum" "$R/s-resume-zero1-w4.txt" | head -1 | cut -c1-200
same s-straight s-resume-zero1-w4 10
[ $W = 4 ] && ENVS="" train s-resume-zero1-w2 /tmp/b1 small 2 zero1 $G 25 --ckpt-every 100000
ENVS="" train s-resume-bucketed-w1 /tmp/b1 small 1 bucketed:25 $G 30 --ckpt-every 100000
grep -h "train loss" "$R"/s-*.txt | cut -c1-150
rm -rf /tmp/b?
echo "== C"
[ $W = 4 ] || { rm -rf "$D"; echo "=== end ($(date -u +%T))"; pack; exit 0; }
ENVS="" TMO=200 train zero1-6.7B /tmp/c1 6.7B 4 zero1 32 14 --fresh --ckpt-every 100000
ENVS="" TMO=200 train zero2-6.7B /tmp/c2 6.7B 4 zero2 32 14 --fresh --ckpt-every 100000
rm -rf /tmp/c? "$D"; echo "=== end ($(date -u +%T))"; pack

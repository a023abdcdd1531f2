#!/usr/bin/env bash
# Call 94 (session 19), on a 4-GPU kind, from the packed folder (copy into .gpu/): fsdp's
# samples at the end (every rank samples together, each stage gathered first). small bf16
# w4, one GEMM table (made by a discarded run): zero2 and fsdp run 16 steps to the end
# (checkpoint, samples); their samples.txt should be the same bytes (fsdp computes zero2's
# bits).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
W=4; G=$((8 * W)); R=/tmp/c94; rm -rf "$R"; mkdir -p "$R"; O="${OUT:-/tmp/out}"; mkdir -p "$O"
pack() { tar czf "$O/c.tgz" -C /tmp c94; }
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
ENVS="" train table-small /tmp/a0 small 4 zero2 32 8 --fresh --ckpt-every 100000
for st in zero2 fsdp; do
  t0=$(date +%s); T="$R/gemm-small.json"
  timeout 120 bin/comm-launch --nproc-per-node 4 -- bin/train run --data "$D" --out /tmp/s-$st --model small --bf16 \
    --global-batch 32 --steps 16 --eval-every 100000 --strategy $st --backend nccl --no-progress --fresh \
    --gemm-choices "$T" > "$R/samples-$st.txt" 2>&1 || { echo "$st failed"; tail -5 "$R/samples-$st.txt"; }
  cp /tmp/s-$st/samples.txt "$R/samples-$st.samples.txt" 2>/dev/null
  echo "$st: $(( $(date +%s) - t0 )) s; $(grep -h 'train loss' "$R/samples-$st.txt" | head -1 | cut -c1-150)"
done
cmp "$R/samples-zero2.samples.txt" "$R/samples-fsdp.samples.txt" && echo "samples: THE SAME BYTES" || echo "samples differ"
head -c 600 "$R/samples-fsdp.samples.txt"; echo
rm -rf /tmp/a0 /tmp/s-* "$D"; echo "=== end ($(date -u +%T))"; pack

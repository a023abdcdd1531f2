#!/usr/bin/env bash
# Call 87 (session 18), on a 4-GPU kind, from the packed folder (copy into .gpu/): where
# ZeRO-2's memory goes. train's peak line now gives its parts (held between steps, the
# captured step's own memory, the pool's mark). xl zero1 and zero2 at world 4, captured and
# --eager; 6.7B zero2; zero1 with ZERO1_PARAM_GATHER=adamw:2. Results under $OUT/c.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R="${OUT:-/tmp/out}/c"; mkdir -p "$R"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$R/gpu.txt"
D=/tmp/dnext; bin/train prepare --data "$D" > /dev/null 2>&1
ms() { python3 -c "
import json,statistics,sys
t=[json.loads(l) for l in open(sys.argv[1]+'/log.jsonl') if '\"train\"' in l]
print(round(int(sys.argv[2])*128/statistics.median(r['tokens_per_s'] for r in t if r['step']>=6)*1e3,3))" "$1" "$2"; }
run() { # name model world strategy steps
  local n=$1 m=$2 w=$3 st=$4 k=$5; shift 5
  rm -rf /tmp/x; local t0=$(date +%s)
  EXTRA="${EXTRA:-}" env "$@" timeout 240 bin/comm-launch --nproc-per-node $w -- bin/train run --data "$D" --out /tmp/x --model $m --bf16 \
    --global-batch $((8 * w)) --steps 100000 --stop-after $k --eval-every 100000 --ckpt-every 100000 --strategy $st --backend nccl \
    --fresh --no-progress $EXTRA > "$R/$n.txt" 2>&1 || { echo "$n failed ($(( $(date +%s) - t0 )) s)"; tail -4 "$R/$n.txt"; return; }
  echo "$n ($(( $(date +%s) - t0 )) s): $(ms /tmp/x $((8 * w))) ms; $(grep -h 'peak GPU memory' "$R/$n.txt" | sort | tail -1 | cut -c1-220)"
  grep -h "train loss" "$R/$n.txt" | head -1 | cut -c1-160
}
run zero1-xl-w4 xl 4 zero1 14
run zero2-xl-w4 xl 4 zero2 14
EXTRA=--eager run zero1-xl-w4-eager xl 4 zero1 8
EXTRA=--eager run zero2-xl-w4-eager xl 4 zero2 8
run zero1-xl-w4-adamw2 xl 4 zero1 30 ZERO1_PARAM_GATHER=adamw:2
run zero1-xl-w4-again xl 4 zero1 30
run zero2-6.7B-w4 6.7B 4 zero2 12
grep -h "peak GPU memory" "$R"/*.txt | grep "rank 0" | cut -c1-400
rm -rf /tmp/x "$D"; echo "=== end ($(date -u +%T))"

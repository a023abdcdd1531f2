#!/usr/bin/env bash
# Session 49, call 271 (nvidia-h200): validation during captured training at the memory's
# edge. The 6.7B at 8 x 1024 tokens on one GPU, captured (call 270: 636.20 ms, 128.92 GiB),
# validating every 4 steps (4 batches each): the validation graph replays beside the
# captured training step's graph.
# Copy into .gpu/ with train-runs.sh. Output: $OUT/c271.tgz.
CALL=c271; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"
t0=$(date +%s)
timeout 200 bin/comm-launch --nproc-per-node 1 -- bin/train run --data "$D" --out /tmp/r-e --model 6.7B --bf16 \
  --global-batch 8 --steps 100000 --stop-after 13 --eval-every 4 --eval-batches 4 --strategy single --backend nccl \
  --no-progress --fresh --context 1024 > "$R/big8-val.txt" 2>&1; echo "rc=$? ($(( $(date +%s) - t0 )) s)"
cp /tmp/r-e/log.jsonl "$R/big8-val.log.jsonl" 2>/dev/null
grep -h "peak\|step:\|error\|validation" "$R/big8-val.txt" | cut -c1-250
grep -h '"eval"\|"val' "$R/big8-val.log.jsonl" | cut -c1-160 | head -5
echo "median step from 6: $(msc big8-val 8 1024) ms"
pack; echo "done $(date -u +%T)"

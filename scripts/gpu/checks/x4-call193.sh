#!/usr/bin/env bash
# Session 36, call 193: FOUR GPUs, from the packed folder (copy this and train-runs.sh into
# .gpu/). Session 35's x4-next-s35.sh (comm's copy-engine reduce-scatter alone, by launch
# size and buffers a launch, at 2 and 4 ranks; then NCCL's kernels), then where the adds
# run inside the world-4 step (COMM_CE_ADDS=wait: on the compute stream after the
# backward, so nothing of the adds runs beside the copies).
CALL=c193; source "$(dirname "$0")/train-runs.sh"
for b in 1 8 32; do
  echo "== copy engines, $b buffers a launch"
  env $N timeout 120 bin/bench allreduce --backend nccl --op reduce-scatter --buffers $b --ranks 2,4 \
    --sizes-mib 20,80,400 --warmup 3 --iters 10 --out "$R/results.jsonl" 2>&1 | grep -v "^\[rank" | tail -7
done
echo "== NCCL's kernels, 8 buffers"
env $N COMM_CE_REDUCE=0 timeout 120 bin/bench allreduce --backend nccl --op reduce-scatter --buffers 8 --ranks 2,4 \
  --sizes-mib 20,80,400 --warmup 3 --iters 10 --out "$R/results-nccl.jsonl" 2>&1 | grep -v "^\[rank" | tail -7
pack
xl single1 1 single $N
xl ddp4 4 bucketed:25 $N
xl ddp4-addswait 4 bucketed:25 $N COMM_CE_ADDS=wait
xl zero4 4 zero1 $N
xl zero4-addswait 4 zero1 $N COMM_CE_ADDS=wait
echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Written in session 35 for the next 4-GPU call (not yet run): FOUR GPUs (nvidia-h200-x4 or
# nvidia-h100-x4), from the packed folder (copy this and train-runs.sh into .gpu/). About
# 4 minutes. Why the copy engines bring in 137-161 GB/s a GPU inside a world-4 step
# (call 189's timelines: DDP's launch every 0.45 ms, 61.5 MB in; zero1's 400 MB buckets
# every 1.8 ms) against 231 GB/s alone in ce-probe (docs/results/gpus-s35.md):
# 1. comm's own deferred bf16 reduce-scatter alone (`bench allreduce --op reduce-scatter`,
#    the copy engines at 2 and 4 ranks): 20, 80 and 400 MiB a launch, in 1, 8 and 32
#    buffers (a DDP launch holds a stage's gradients: about 82 MB in several tensors);
# 2. the same by NCCL's kernels (COMM_CE_REDUCE=0), for the rate they reach.
# If comm's path alone is near 231 GB/s, the step loses the rest to what runs beside it;
# if not, to the launch's own copies and flags (then: fewer, larger copies a launch).
CALL=rs-next; source "$(dirname "$0")/train-runs.sh"
for b in 1 8 32; do
  env $N timeout 120 bin/bench allreduce --backend nccl --op reduce-scatter --buffers $b --ranks 2,4 \
    --sizes-mib 20,80,400 --warmup 3 --iters 10 --out "$R/results.jsonl" 2>&1 | grep -v "^\[rank" | tail -7
done
env $N COMM_CE_REDUCE=0 timeout 120 bin/bench allreduce --backend nccl --op reduce-scatter --buffers 8 --ranks 2,4 \
  --sizes-mib 20,80,400 --warmup 3 --iters 10 --out "$R/results-nccl.jsonl" 2>&1 | grep -v "^\[rank" | tail -7
pack
echo "done $(date -u +%T)"

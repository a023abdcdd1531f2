#!/usr/bin/env bash
# Session 55, call 308 (nvidia-h200-x2): DDP's tail at world 2. Call 307's timeline put
# 0.7-1.2 ms of copy-engine transfers after bucketed:25's backward (the last buckets'
# parts). `DDP_TAIL_STAGES=K` sends the reduce-scatters launched at the model's first K
# stages by NCCL's kernels on a second stream (measured only at world 4 before: no gain,
# gpus-s37.md). Here, world 2, xl bf16, 8 x 128 a GPU, clipping at 1.0, 20 steps,
# interleaved: default against K = 2 and 4; bench single --clip 1 first as the base.
# Written before: at most -0.7 ms (the tail's transfers), if NCCL's kernels beside the last
# GEMMs cost less than they hide. Copy into .gpu/ with train-runs.sh and nccl/.
CALL=c308; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"
timeout 100 bin/bench single --size xl --dtype bf16 --mode step --clip 1 --batch 8 --vocab "$vocab" --warmup 5 --steps 30 \
  --out "$R/single.jsonl" 2>&1 | tail -1 | cut -c1-120
for k in 1 2; do
  xl "d-$k" 2 bucketed:25 $N
  xl "t2-$k" 2 bucketed:25 $N DDP_TAIL_STAGES=2
  xl "t4-$k" 2 bucketed:25 $N DDP_TAIL_STAGES=4
done
same d-1 t4-1 0
pack; echo "done $(date -u +%T)"

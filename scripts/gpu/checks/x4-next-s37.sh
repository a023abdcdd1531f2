#!/usr/bin/env bash
# Written in session 37 for the next 4-GPU call (not yet run): FOUR GPUs (nvidia-h200-x4 or
# nvidia-h100-x4), from the packed folder (copy this, replays.py and train-runs.sh into
# .gpu/). About 7 minutes. No code change; what docs/results/gpus-s37.md left to measure:
# 1. Split DDP at world 4, AdamW beside NCCL's gathers (+1.3 ms of AdamW): the gathers by the
#    copy engines instead (COMM_CE_GATHER=1; no SMs), and chained in the backward
#    (DDP_SPLIT_EARLY=1, AdamW then alone).
# 2. The copy engines' adds beside the backward (1.87 ms of kernels a step, up to 528 blocks
#    a run): capped at 264 and 132 blocks (COMM_CE_ADDS_BLOCKS), DDP and zero1.
# 3. Timelines with kernel records only (CUPTI_TRACE_KERNELS_ONLY=1): single, zero1 and
#    bucketed:25 at world 4, 8 rows (zero1's forward beside the gathers, 3 ms in session 35,
#    was measured with copy records).
CALL=next-s37; source "$(dirname "$0")/train-runs.sh"
xl single1 1 single $N
xl d4 4 bucketed:25 $N
xl d4-ceg 4 bucketed:25 $N COMM_CE_GATHER=1
xl d4-early 4 bucketed:25 $N COMM_CE_GATHER=1 DDP_SPLIT_EARLY=1
for b in 264 132; do xl d4-b$b 4 bucketed:25 $N COMM_CE_ADDS_BLOCKS=$b; done
xl z4 4 zero1 $N
xl z4-b132 4 zero1 $N COMM_CE_ADDS_BLOCKS=132
env LD_LIBRARY_PATH="$PWD/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CUPTI_TRACE_KERNELS_ONLY=1 TRACE_KEEP=1 TRACE_BATCH=8 TRACE_WORLD=4 \
  TRACE_STRATEGIES="single zero1 bucketed:25" OUT=$R/k timeout 200 bash run.sh trace 2>&1 | grep -v "^\[rank" | grep -i "w1\|w4\|fail\|error" | cut -c1-160 | head -8
python3 replays.py $R/k/trace-bucketed-a1.csv.gz | grep "^0 " | sed -n '6,9p'
pack; echo "done $(date -u +%T)"

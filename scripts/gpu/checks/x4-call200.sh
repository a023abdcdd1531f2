#!/usr/bin/env bash
# Written in session 36 for the next 4-GPU call (not yet run): FOUR GPUs (nvidia-h200-x4 or
# nvidia-h100-x4), from the packed folder (copy this and train-runs.sh into .gpu/). About
# 6 minutes. No code change: two knobs not swept since the copy engines took the
# reduce-scatters at world 4 (docs/results/gpus-s36.md).
# 1. DDP's bucket size at world 4: a copy-engine launch costs some 30-60 µs and each buffer
#    in it 5-7 µs more (call 193), and bucketed:25 launches one a stage, 50 a step; larger
#    buckets span stages (fewer launches, a larger last one). 8 and 32 rows.
# 2. zero1's buckets gathered beside AdamW at world 4 (ZERO1_PARAM_GATHER=adamw:K; the
#    default ⌈8 ÷ 4⌉ = 2 of 8 was chosen with 10 buckets in session 27, before the copy
#    engines).
CALL=call200; source "$(dirname "$0")/train-runs.sh"
xl single1 1 single $N
for b in 25 50 100 200; do xl d4-$b 4 bucketed:$b $N; done
for k in 1 2 3 4; do xl z4-k$k 4 zero1 $N ZERO1_PARAM_GATHER=adamw:$k; done
xl z4-ctas16 4 zero1 $N NCCL_MAX_CTAS=16
xl z4-minctas32 4 zero1 $N NCCL_MIN_CTAS=32
export TMO=75
train single32 /tmp/r-s32 xl 1 single 32 16 --fresh
for b in 25 100; do ENVS="$N" train d4s32-$b /tmp/r-d4s32-$b xl 4 bucketed:$b 128 16 --fresh; done
echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Session 57, call 317 (nvidia-h200-x2): split DDP's tail at world 2. Each launch's gather
# is chained to its adds in the backward there, so the last launches' copies, adds and
# gathers all run after the backward's last kernel, before the norm (call 312's timeline:
# 2-3 gaps, 0.41-0.87 ms, then the norm's all-reduce). DDP_SPLIT_LATE_STAGES=K leaves the
# gathers of the launches at the model's first K stages to after the norm, beside every
# other bucket's AdamW, their own AdamW last.
# xl bf16 bucketed:25 at world 2, 8 x 128 a GPU, clipping at 1.0, 20 steps, interleaved
# K = 0 (today), 2, 4, 1. The GEMM table is tuned once, by a world-1 run first, and read by
# both ranks of every later run. Written before: K = 2 takes 0.2-0.5 ms off the step; the
# runs of one K equal each other bit for bit (a K moves the norm's slots, so across K only
# the last bits of the norm may move).
CALL=c317; TABLE_ONLY=; source "$(dirname "$0")/train-runs.sh"
xl t-1 1 single $N
for k in 1 2; do
  xl "k0-$k" 2 bucketed:25 $N
  xl "k2-$k" 2 bucketed:25 $N DDP_SPLIT_LATE_STAGES=2
  xl "k4-$k" 2 bucketed:25 $N DDP_SPLIT_LATE_STAGES=4
  xl "k1-$k" 2 bucketed:25 $N DDP_SPLIT_LATE_STAGES=1
done
for k in k0 k2 k4 k1; do same $k-1 $k-2 0; done
same k0-1 k2-1 0
pack; echo "done $(date -u +%T)"

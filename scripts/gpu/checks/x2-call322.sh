#!/usr/bin/env bash
# Session 57, call 322 (nvidia-h200-x2): ZeRO-1's gathers beside AdamW at world 2, past call
# 321 (of 10 buckets: 3 beside AdamW 39.77 / 39.60 ms, 4 (the default) 38.00 / 38.10, 5
# 37.85 / 37.93). xl bf16, 8 x 128 a GPU, clipping at 1.0, 20 steps, one GEMM table (a
# world-1 run first), interleaved, three runs each: 4 (default), 5, 6.
# Written before: 5 again 0.1-0.2 ms under 4; 6 no better than 5 (the step's end waits).
CALL=c322; TABLE_ONLY=; source "$(dirname "$0")/train-runs.sh"
xl t-1 1 single $N
for k in 1 2 3; do
  xl "z-$k" 2 zero1 $N
  xl "a5-$k" 2 zero1 $N ZERO1_PARAM_GATHER=adamw:5
  xl "a6-$k" 2 zero1 $N ZERO1_PARAM_GATHER=adamw:6
done
same z-1 a5-1 0; same z-1 a6-1 0
pack; echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Session 57, call 321 (nvidia-h200-x2): ZeRO-1's knobs at world 2 with today's code. Call
# 320's timeline of zero1 (world 2) left 2.2-2.3 ms idle a replay: 0.38-0.55 ms after the
# backward (the last bucket's reduce-scatter), 0.16-0.42 ms in the forward (a bucket's
# gather not in), and 0.44 ms at the step's end (the gathers beside AdamW not in when it
# ends). The defaults were chosen in calls 71-74 (400 MB buckets, H100) and 172 (4 of 10
# buckets gathered beside AdamW). xl bf16, 8 x 128 a GPU, clipping at 1.0, 20 steps, one
# GEMM table (a world-1 run first), interleaved, two runs each: the default,
# ZERO1_PARAM_GATHER=adamw:3 and adamw:5; then zero1:300 and zero1:600 once each.
# Written before: adamw:3 shortens the step's end by up to 0.3 ms and lengthens the
# forward's waits by about as much; no knob moves the step by more than 0.3 ms.
CALL=c321; TABLE_ONLY=; source "$(dirname "$0")/train-runs.sh"
xl t-1 1 single $N
for k in 1 2; do
  xl "z-$k" 2 zero1 $N
  xl "a3-$k" 2 zero1 $N ZERO1_PARAM_GATHER=adamw:3
  xl "a5-$k" 2 zero1 $N ZERO1_PARAM_GATHER=adamw:5
done
xl b300 2 zero1:300 $N
xl b600 2 zero1:600 $N
same z-1 z-2 0; same z-1 a3-1 0
pack; echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Session 53, call 291 (nvidia-h200): where `train run`'s captured step goes, kernel by
# kernel (scripts/cupti's tracer; graph kernels included), at 8 x 1024 tokens for the 6.7B
# and xl and at 8 x 128 for xl: `bench profile`'s attention marks (call 289: 6.7B forward
# 16.32 ms, backward 34.00, xl 10.12 / 21.81) hold 0.23 ms (forward) and 0.26 ms (backward)
# a 6.7B layer beyond the flash kernels' Nsight Compute times (call 290), and its optimizer
# mark is 57.9 ms.
# It ran an inline precursor of trace1 (files summary-NAME.txt and kernels-NAME.txt);
# the same runs now go through run.sh's trace job.
CALL=c291; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"; export TMO=200
trace1 big1k 6.7B 1024
trace1 xl1k xl 1024
trace1 xl128 xl 128
pack; echo "done $(date -u +%T)"

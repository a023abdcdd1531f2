#!/usr/bin/env bash
# Session 53, call 295 (nvidia-h200): train-runs.sh's trace1 through run.sh's trace job
# (TRACE_CONTEXT, TRACE_KERNELS), xl at 8 x 128: that it runs and what it writes (call 293's
# trace1 of the same: 41.80 ms a replay, AdamW 14.44 ms).
# Copy into .gpu/ with train-runs.sh, run.sh and cupti/. Output: $OUT/c295.tgz.
CALL=c295; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"
trace1 xl128 xl 128
ls "$R/trace-xl128"; pack; echo "done $(date -u +%T)"

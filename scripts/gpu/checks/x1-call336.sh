#!/usr/bin/env bash
# Session 59, call 336 (nvidia-h200): where xl's captured `train run` step at 8 x 128 goes
# with the grouped AdamW: every kernel of a replay (scripts/cupti's tracer; call 304 had
# AdamW 14.09 ms in 339 launches, 336 graph memsets 0.34 ms, 97 column sums 0.29 ms).
# Copy into .gpu/ with train-runs.sh and cupti/ (scripts/cupti/build.sh). Output: $OUT/c336.tgz.
CALL=c336; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"
trace1 xl128-tr xl 128
ls "$R/trace-xl128-tr"
pack; echo "done $(date -u +%T)"

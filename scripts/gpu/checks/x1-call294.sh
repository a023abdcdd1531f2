#!/usr/bin/env bash
# Session 53, call 294 (nvidia-h200): the RMSNorm backward for rows above 3,072 columns as
# rmsnorm_bwd_w (four warps a row, the ∂w sums in registers) instead of rmsnorm_bwd_v (three
# warps a block at the 6.7B's 4,096 columns; call 293: 10.83 ms of the 6.7B's step at
# 8 x 1024, 1.56 TB/s in call 291).
#   bench model-check: the new 701 x 4104 bf16 row, and the rest;
#   traces of the 6.7B and of xl (1,600 columns: the old kernel still) at 8 x 1024;
#   the 6.7B at 8 x 1024 (captured, untraced) beside PyTorch's per-block compile (call 293:
#     593.24 against 635.29 ms).
# Copy into .gpu/ with train-runs.sh and cupti/ (scripts/cupti/build.sh). Output: $OUT/c294.tgz.
CALL=c294; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"; export TMO=200
modelcheck 'rms_norm\|embedding\|fail\|error\|panick\|differ'
trace1 big1k-tr 6.7B 1024
trace1 xl1k-tr xl 1024
beside1k big8 6.7B 12 compile-blocks
pack; echo "done $(date -u +%T)"

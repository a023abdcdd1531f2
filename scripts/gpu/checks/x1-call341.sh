#!/usr/bin/env bash
# Session 59, call 341 (nvidia-h200): after the review's mend (the grouped AdamW's addresses
# from pinned::device_ptr, the side-stream gradient check written once): bench model-check,
# then xl `train run` single twice and zero1 once at world 1, one GEMM table. Written
# before: everything passes, the steps as call 340's (39.6-39.9 ms), the same bits.
CALL=c341; TABLE_ONLY=; source "$(dirname "$0")/train-runs.sh"
adamwcheck
pack; echo "done $(date -u +%T)"

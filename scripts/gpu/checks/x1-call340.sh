#!/usr/bin/env bash
# Session 59, call 340 (nvidia-h200): the session's last binaries (AdamW::step grouped too,
# adamw.cu's update4: PTX byte-identical): bench model-check, then xl `train run` single twice
# and zero1 once at world 1, one GEMM table. Written before: everything passes; single and
# zero1 at call 334's 39.5-39.8 ms, the same bits.
CALL=c340; TABLE_ONLY=; source "$(dirname "$0")/train-runs.sh"
adamwcheck
pack; echo "done $(date -u +%T)"

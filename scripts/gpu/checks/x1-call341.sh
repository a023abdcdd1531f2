#!/usr/bin/env bash
# Session 59, call 341 (nvidia-h200): after the review's mend (the grouped AdamW's addresses
# from pinned::device_ptr, the side-stream gradient check written once): bench model-check,
# then xl `train run` single twice and zero1 once at world 1, one GEMM table. Written
# before: everything passes, the steps as call 340's (39.6-39.9 ms), the same bits.
CALL=c341; TABLE_ONLY=; source "$(dirname "$0")/train-runs.sh"
modelcheck "grouped\|AdamW\|fail\|error\|panic"
xl t-1 1 single > /dev/null
xl s1 1 single > /dev/null; xl s2 1 single > /dev/null; xl z1 1 zero1 > /dev/null
for r in s1 s2 z1; do echo "$r: $(msc $r 8 128) ms; $(peak $r)"; done
same s1 s2 0; same s1 z1 0
pack; echo "done $(date -u +%T)"

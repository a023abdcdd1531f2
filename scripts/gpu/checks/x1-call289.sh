#!/usr/bin/env bash
# Session 52, call 289 (nvidia-h200): flash::tile with one address a side and fixed steps
# (new) against C (call 287's packed binary, 4ede8c1's kernels), one call.
#   bench profile at 8 x 1024 tokens of the 6.7B and xl with each (call 287, C: 6.7B
#   forward 16.12 ms, backward 36.63; xl 9.93, 22.01); bench model-check with new.
# Packed folder: bin (new), C/bin (bench only). Output: $OUT/c289.tgz.
CALL=c289; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"
profile1k 6.7B C new
profile1k xl C new
modelcheck 'tiled\|fail\|error\|panick\|differ'
pack; echo "done $(date -u +%T)"

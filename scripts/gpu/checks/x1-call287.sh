#!/usr/bin/env bash
# Session 52, call 287 (nvidia-h200): flash::order with the lightest quarter of the ranks
# last across every head (C, packed) against groups for every rank (B, call 286's packed
# binary, with flash_bwd_q's three stages as C) and HEAD's kernels (head), one call.
#   bench profile at 8 x 1024 tokens of the 6.7B and xl with each (call 286: head / B
#   6.7B forward 17.24 / 17.12 ms, backward 39.48 / 38.09; xl 10.14 / 10.09, 22.39 / 22.75);
#   bench model-check with C; Nsight Compute, one launch each: flash_fwd2 and the backward's
#   two at the 6.7B's heads (C), the backward's two at xl's (head, C).
# Packed folder: bin (C), B/bin, head/bin (bench only). Output: $OUT/c287.tgz.
CALL=c287; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"
profile1k 6.7B head B new
profile1k xl head B new
modelcheck 'tiled\|fail\|error\|panick\|differ'
ncukern new 6.7B 'flash_fwd2_e128' 3 1 fwd
ncukern new 6.7B 'flash_bwd_(kv|q2)_e128' 4 2 bwd
for v in head new; do ncukern $v xl 'flash_bwd_(kv|q2)_e64' 4 2 bwd; done
ncusum
pack; echo "done $(date -u +%T)"

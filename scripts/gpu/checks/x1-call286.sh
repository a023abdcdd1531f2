#!/usr/bin/env bash
# Session 52, call 286 (nvidia-h200): the tiled attention's blocks in groups of heads
# (flash::order; variant A) and, on top, flash_bwd_q's three stages above E = 64 (B),
# against HEAD's binaries (head: c314175's kernels), one call.
#   bench profile at 8 x 1024 tokens of the 6.7B and xl with each (attention marks, step);
#   bench model-check with B; Nsight Compute, one launch each of flash_fwd2, flash_bwd_kv,
#   flash_bwd_q2 at the 6.7B's heads, head and B: duration, DRAM, L2 hit rate, tensor pipe.
# Packed folder: bin (B), A/bin, head/bin (bench only). Output: $OUT/c286.tgz.
CALL=c286; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"
profile1k 6.7B head A new
profile1k xl head A new
modelcheck 'tiled\|fail\|error\|panick\|differ'
for v in head new; do ncukern $v 6.7B 'flash_fwd2_e128' 3 1 fwd; ncukern $v 6.7B 'flash_bwd_(kv|q2)_e128' 4 2 bwd; done
ncusum
pack; echo "done $(date -u +%T)"

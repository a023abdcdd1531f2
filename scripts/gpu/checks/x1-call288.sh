#!/usr/bin/env bash
# Session 52, call 288 (nvidia-h200): the 6.7B's `train run` at 8 x 1024 tokens, captured,
# with flash::order and flash_bwd_q's three stages (new, 4ede8c1) and with HEAD's kernels
# (head: c314175's train), alternated new / head / new: the median step from step 6 and
# the peak. bench profile put the attention 2.5 ms shorter a step (call 287).
# Packed folder: bin (new), head/bin (train, comm-launch). Output: $OUT/c288.tgz.
CALL=c288; TABLE_ONLY=6.7B; source "$(dirname "$0")/train-runs.sh"; export TMO=200
big() { use $2; train $1 /tmp/r-b 6.7B 1 single 8 12 --fresh --context 1024 > /dev/null; rm -rf /tmp/r-b; use new
  echo "6.7B 8x1024 $2 ($1): $(msc $1 8 1024) ms; $(peak $1)"; }
big new1 new; big head1 head; big new2 new
pack; echo "done $(date -u +%T)"

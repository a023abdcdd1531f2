#!/usr/bin/env bash
# Session 59, call 335 (nvidia-h200): xl and the 6.7B at 8 x 1024 tokens on one GPU, captured,
# with sessions 58-59's kernels (the tiled attention's D on adjacent lanes, the grouped
# AdamW), beside PyTorch's fastest variant there in the same call (calls 293-294: compile-ro
# at xl, per-block compile at the 6.7B; ours 0.92x both; call 332: xl 203.84-204.84 ms, the
# 6.7B 582.88, without PyTorch).
# Written before: xl about 203 ms (call 332's minus part of the grouped AdamW's 0.6 ms), the
# 6.7B about 581; the ratios 0.90-0.92x if PyTorch takes what it took in calls 293-294.
CALL=c335; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"; export TMO=200
beside1k xl1k xl 14 compile-ro
beside1k big8 6.7B 12 compile-blocks
pack; echo "done $(date -u +%T)"

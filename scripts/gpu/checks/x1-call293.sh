#!/usr/bin/env bash
# Session 53, call 293 (nvidia-h200): the embedding's backward with eight gradient rows in
# flight a thread and coalesced id loads (call 292: embed_bwd 1.48 ms of xl's 8 x 1024 step,
# 0.099 ms at 8 x 128 against 0.043 before 4db34f0, a row that many tokens name waiting on
# one load at a time).
#   bench model-check: the 9,000-token embedding row (call 292: value and gradient 0.00e0);
#   traces (every kernel a replay) of xl at 8 x 1024 and 8 x 128 and of the 6.7B at 8 x 1024;
#   xl at 8 x 1024 and the 6.7B at 8 x 1024 (captured, untraced) beside PyTorch's fastest
#     variant there (call 292: 211.44 against compile-ro 231.27 ms; 598.95 against per-block
#     compile 641.58).
# Copy into .gpu/ with train-runs.sh and cupti/ (scripts/cupti/build.sh). Output: $OUT/c293.tgz.
CALL=c293; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"; export TMO=200
modelcheck 'embedding\|fail\|error\|panick\|differ'
trace1 xl1k-tr xl 1024
trace1 xl128-tr xl 128
beside1k xl1k xl 14 compile-ro
beside1k big8 6.7B 12 compile-blocks
trace1 big1k-tr 6.7B 1024
pack; echo "done $(date -u +%T)"

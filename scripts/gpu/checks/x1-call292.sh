#!/usr/bin/env bash
# Session 53, call 292 (nvidia-h200): the one-op embedding above 4,096 tokens (4db34f0; its
# binaries in emb/bin) and then, on it, the RMSNorm backward's loads unrolled and the rope
# split and D = dY · Y taken apart in 32 bits (new).
#   bench model-check (new): the 9,000-token embedding row, the tiled attention's rows;
#   traces (every kernel a replay) of xl at 8 x 1024 with emb and new, and of xl at 8 x 128
#     (call 291, before both: index-add 4.30 ms, casts and sums 1.45, the norm's backward
#     5.08, the rope split 2.86, D 1.75 ms of xl's 8 x 1024 step);
#   xl at 8 x 1024 and the 6.7B at 8 x 1024 (captured) beside PyTorch's fastest variant
#     there (call 290: 214.86 against compile-ro 229.43 ms; 601.37 against per-block
#     compile 637.22).
# Copy into .gpu/ with train-runs.sh and cupti/ (scripts/cupti/build.sh), 4db34f0's binaries
# into .gpu/emb/bin. Output: $OUT/c292.tgz.
CALL=c292; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"; export TMO=200
modelcheck 'embedding\|tiled\|fail\|error\|panick\|differ'
use emb; trace1 xl1k-emb xl 1024; use new
trace1 xl1k-new xl 1024
trace1 xl128-new xl 128
beside1k xl1k xl 14 compile-ro
beside1k big8 6.7B 12 compile-blocks
pack; echo "done $(date -u +%T)"

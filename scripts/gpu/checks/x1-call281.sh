#!/usr/bin/env bash
# Session 51, call 281 (nvidia-h200): the tiled backward starts from the heads the forward
# split (kept in the rows' place) instead of splitting the rows again, against 2a-ex2 (call
# 280's new binary: its bench and train in ex2/bin).
#   bench model-check (tiled rows, bar 3e-2; each backward twice, the same bits);
#   small, 256 tokens: captured against eager, and against --activation-checkpointing (the
#   forward made again in the backward): the same bits;
#   bench profile at 8 x 1024, xl and 6.7B, new and ex2 (call 280: backward 25.60 and 43.66 ms);
#   xl `train run` 8 x 1024 (call 280: 216.28 ms; PyTorch compile-ro 225.44 there);
#   the 6.7B 8 x 1024 captured: step and peak (plan 131.1 GiB; call 277: 623.83 ms, 128.92).
# Copy into .gpu/ with train-runs.sh, the older binaries into .gpu/ex2/bin. Output: $OUT/c281.tgz.
CALL=c281; TABLE_ONLY=small; source "$(dirname "$0")/train-runs.sh"; export TMO=150
modelcheck "tiled\|fail\|error\|panick\|differ"
capeager small 256
train small-ac /tmp/r-s small 1 single 8 20 --fresh --context 256 --activation-checkpointing > /dev/null; rm -rf /tmp/r-s
same small-captured small-ac
for m in xl 6.7b; do profile1k $m new ex2; done
train xl1k /tmp/r-x xl 1 single 8 14 --fresh --context 1024 > /dev/null; rm -rf /tmp/r-x
echo "xl 8x1024: $(msc xl1k 8 1024) ms; $(peak xl1k)"
TMO=200 train big8 /tmp/r-b 6.7B 1 single 8 12 --fresh --context 1024 > /dev/null; rm -rf /tmp/r-b
echo "6.7B 8x1024 captured: $(msc big8 8 1024) ms; $(peak big8)"
pack; echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Session 50, call 278 (nvidia-h200-x2): the tiled backward in two launches, five products a
# tile pair (flash_bwd_kv writes each pair's dSᵀ, flash_bwd_q makes ∂q from it), against
# 7dc3fad's two kinds of block in one launch (seven; its binaries in old/bin).
#   bench model-check (tiled rows, bar 3e-2; each backward twice, the same bits);
#   small, 256 tokens, captured against eager: the same bits;
#   bench profile at 8 x 1024, xl and 6.7B, new and old (call 275: backward 29.11, 53.50 ms);
#   13B, 2048 tokens, 4 a GPU, fsdp at world 2, captured (call 276: 1293.27 ms, 124.57 GiB).
# Copy into .gpu/ with train-runs.sh, the old binaries into .gpu/old/bin. Output: $OUT/c278.tgz.
CALL=c278; TABLE_ONLY=small; source "$(dirname "$0")/train-runs.sh"; export TMO=200
modelcheck "tiled\|fail\|error\|panick\|differ"
capeager small 256
for m in xl 6.7b; do profile1k $m new old; done
ENVS="$N" train huge-2k /tmp/r-h 13B 2 fsdp 8 10 --fresh --context 2048 > /dev/null; rm -rf /tmp/r-h
echo "ours 13B 2048 fsdp w2: $(msc huge-2k 8 2048) ms; $(peak huge-2k)"
pack; echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Session 51, call 279 (nvidia-h200): the tiled forward and ∂q with two query tiles a block
# (flash_fwd2, flash_bwd_q2: a warp's 32 rows share each k or v fragment read), against
# HEAD 5e52528's one tile (its binaries in old/bin).
#   bench model-check (tiled rows, bar 3e-2; t192 keeps one tile, the others take two; each
#   backward twice, the same bits);
#   small, 256 tokens (two tiles), captured against eager: the same bits;
#   bench profile at 8 x 1024, xl and 6.7B, new and old (call 278: xl forward ~11.07, backward
#   26.78 ms; 6.7B forward ~19.03, backward 45.96);
#   xl `train run` at 8 x 1024, new and old (call 276: 222.04 ms).
# Copy into .gpu/ with train-runs.sh, the old binaries into .gpu/old/bin. Output: $OUT/c279.tgz.
CALL=c279; TABLE_ONLY=small; source "$(dirname "$0")/train-runs.sh"; export TMO=150
modelcheck "tiled\|fail\|error\|panick\|differ"
capeager small 256
for m in xl 6.7b; do profile1k $m new old; done
for v in new old; do use $v
  train xl1k-$v /tmp/r-x xl 1 single 8 14 --fresh --context 1024 > /dev/null; rm -rf /tmp/r-x
  echo "xl 8x1024 $v: $(msc xl1k-$v 8 1024) ms; $(peak xl1k-$v)"
done; use new
pack; echo "done $(date -u +%T)"

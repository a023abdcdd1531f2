#!/usr/bin/env bash
# Session 51, call 280 (nvidia-h200): the tiled attention's exponentials as one
# ex2.approx.ftz each, the scale folded into its FFMA (exp2f took four instructions, two of
# them for subnormal results), against 2338b58 (two query tiles a block, exp2f; binaries in
# mid/bin) and 5e52528 (session 50's end; old/bin).
#   bench model-check (tiled rows, bar 3e-2; each backward twice, the same bits);
#   small, 256 tokens, captured against eager: the same bits;
#   bench profile at 8 x 1024, xl and 6.7B: new, mid, old (call 279: xl 10.48 / 25.31 ms
#   forward / backward at 2338b58, 10.85 / 25.85 at 5e52528; 6.7B 17.19 / 43.93, 18.22 / 44.76);
#   xl `train run` 8 x 1024 beside PyTorch compile-ro (call 276: 222.04 against 226.60 ms);
#   the 6.7B 8 x 1024 `--eager`: its step and peak (plan 119.5 GiB; call 277: 621.99 ms, 118.16).
# Copy into .gpu/ with train-runs.sh, the older binaries into .gpu/mid/bin, .gpu/old/bin.
# Output: $OUT/c280.tgz.
CALL=c280; TABLE_ONLY=small; source "$(dirname "$0")/train-runs.sh"; export TMO=150
modelcheck "tiled\|fail\|error\|panick\|differ"
capeager small 256
for m in xl 6.7b; do profile1k $m new mid old; done
train xl1k /tmp/r-x xl 1 single 8 14 --fresh --context 1024 > /dev/null; rm -rf /tmp/r-x
echo "xl 8x1024: $(msc xl1k 8 1024) ms; $(peak xl1k)"
TV=compile-ro torchc xl 1024
TMO=200 train big8-eager /tmp/r-b 6.7B 1 single 8 12 --fresh --context 1024 --eager > /dev/null; rm -rf /tmp/r-b
echo "6.7B 8x1024 --eager: $(msc big8-eager 8 1024) ms; $(peak big8-eager)"
pack; echo "done $(date -u +%T)"

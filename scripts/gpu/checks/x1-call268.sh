#!/usr/bin/env bash
# Session 49, call 268 (nvidia-h200): the mma.sync tiled attention (call 267: xl 8 x 1024
# 220.83 ms against the composed 253.9) beside every PyTorch trainer variant at long context.
#   xl, 8 x 1024, one GPU: ours (tiled), then torch_train_best.py compile-blocks, compile-ro,
#   compile, eager (flash SDPA in each);
#   6.7B, 8 x 1024, one GPU: ours --eager (call 264: 685.89 ms), PyTorch compile-blocks and eager.
# Copy into .gpu/ with train-runs.sh. Output: $OUT/c268.tgz.
CALL=c268; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"; export TMO=200
ENVS="" train xl1k-tiled /tmp/r-x xl 1 single 8 14 --fresh --context 1024 > /dev/null; rm -rf /tmp/r-x
echo "xl 8x1024 tiled: $(msc xl1k-tiled 8 1024) ms; $(peak xl1k-tiled)"
for v in compile-blocks compile-ro compile eager; do TV=$v torchc xl 1024; done
ENVS="" train big8-eager /tmp/r-b 6.7B 1 single 8 12 --fresh --context 1024 --eager > /dev/null; rm -rf /tmp/r-b
echo "6.7B 8x1024 eager: $(msc big8-eager 8 1024) ms; $(peak big8-eager)"
for v in compile-blocks eager; do TV=$v torchc 6.7B 1024; done
pack; echo "done $(date -u +%T)"

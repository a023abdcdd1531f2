#!/usr/bin/env bash
# Session 50, call 277 (nvidia-h200): the 6.7B at 8 x 1024 tokens on one GPU with the
# pipelined tiled attention, `--eager` (call 268: 621.05 ms, 118.16 GiB) and captured (call
# 270: 636.20 ms, 128.92 GiB), beside PyTorch compile-blocks (call 268: 628.35 ms; its eager
# ran out of memory there).
# Copy into .gpu/ with train-runs.sh. Output: $OUT/c277.tgz.
CALL=c277; TABLE_ONLY=6.7B; source "$(dirname "$0")/train-runs.sh"; export TMO=240
ENVS="" train big8-eager /tmp/r-b 6.7B 1 single 8 12 --fresh --context 1024 --eager > /dev/null; rm -rf /tmp/r-b
echo "6.7B 8x1024 --eager: $(msc big8-eager 8 1024) ms; $(peak big8-eager)"
TV=compile-blocks torchc 6.7B 1024
ENVS="" train big8 /tmp/r-b 6.7B 1 single 8 12 --fresh --context 1024 > /dev/null; rm -rf /tmp/r-b
echo "6.7B 8x1024 captured: $(msc big8 8 1024) ms; $(peak big8)"
pack; echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Session 48, call 261 (nvidia-h200): the tiled (flash) attention above 128 tokens.
#   bench model-check (its fused-kernel rows hold the tiled attention at t 192, 256, 512);
#   xl, 8 x 1024 tokens, one GPU: tiled against MODEL_ATTN_TILED=0 (the composed ops);
#   small at 256 tokens: eager against captured, the same bits;
#   the 6.7B at 8 x 1024 on one GPU without activation checkpointing (refused before: plan
#   147 GiB; now 130.9), beside PyTorch's strongest there (compile-blocks, flash SDPA; call
#   260: 638.7 ms, 126.76 GiB); xl at 1024 beside PyTorch's too.
# Copy into .gpu/ with train-runs.sh (msc, peak, torchc: its helpers since session 48). Output: $OUT/c261.tgz.
CALL=c261; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"; export TMO=200
modelcheck "attention\|fail\|error"
xl1k
capeager small 256
ENVS="" train big1k /tmp/r-b 6.7B 1 single 8 12 --fresh --context 1024 > /dev/null
echo "ours 6.7B 8x1024 single, no AC: $(msc big1k 8 1024) ms; $(peak big1k)"; tail -2 "$R/big1k.txt" | cut -c1-200; rm -rf /tmp/r-b
torchc 6.7B 1024
torchc xl 1024
pack; echo "done $(date -u +%T)"

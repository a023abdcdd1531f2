#!/usr/bin/env bash
# Session 48, call 264 (nvidia-h200): the tiled attention with base-2 exponentials and
# 16-byte scratch reads, beside PyTorch's strongest trainer at 1024 tokens.
#   bench model-check (the tiled attention's rows); bench profile, xl bf16 at 8 x 1024;
#   xl, 8 x 1024, one GPU: tiled against MODEL_ATTN_TILED=0 (call 263: 258.63 against 253.22);
#   the 6.7B at 8 x 1024 on one GPU without activation checkpointing, eager (call 262:
#   711.28 ms, 118.16 GiB);
#   PyTorch (torch_train_best.py compile-blocks, flash SDPA) at xl and 6.7B, 8 x 1024.
# Copy into .gpu/ with train-runs.sh (msc, peak, torchc: its helpers since session 48). Output: $OUT/c264.tgz.
CALL=c264; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"; export TMO=200
modelcheck "tiled\|fail\|error"
timeout 120 bin/bench profile --size xl --dtype bf16 --context 1024 --out "$R/profile-tiled.jsonl" --svg-dir "$R/svg" > "$R/profile-tiled.txt" 2>&1
echo "profile rc=$?"; sed -n 2p "$R/profile-tiled.txt"; grep "attn/core" "$R/profile-tiled.txt" | head -2; rm -rf "$R/svg"; pack
xl1k
torchc xl 1024
ENVS="" train big8-eager /tmp/r-b 6.7B 1 single 8 12 --fresh --context 1024 --eager > /dev/null; rm -rf /tmp/r-b
echo "6.7B 8x1024 eager: $(msc big8-eager 8 1024) ms; $(peak big8-eager)"
torchc 6.7B 1024
pack; echo "done $(date -u +%T)"

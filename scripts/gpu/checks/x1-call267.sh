#!/usr/bin/env bash
# Session 49, call 267 (nvidia-h200): the tiled attention on mma.sync (scores in registers).
#   bench model-check (the tiled rows; bar 3e-2); bench profile, xl bf16 at 8 x 1024 (call 264:
#   tiled forward 19.8 ms, backward 66-67 ms a step);
#   xl, 8 x 1024, one GPU: tiled (backward at three blocks an SM), MODEL_FLASH_BWD_BLOCKS=2
#   (two blocks; a switch of this call's binary, removed after it: xl1k's XL1K=bwd2 ran it),
#   and MODEL_ATTN_TILED=0 (call 264: tiled 260.20, composed 260.58 ms);
#   small, 256 tokens, captured against eager with one GEMM table: the same bits.
# Copy into .gpu/ with train-runs.sh. Output: $OUT/c267.tgz.
CALL=c267; TABLE_ONLY=small; source "$(dirname "$0")/train-runs.sh"; export TMO=200
modelcheck "tiled\|fail\|error\|panick"
timeout 120 bin/bench profile --size xl --dtype bf16 --context 1024 --out "$R/profile-tiled.jsonl" --svg-dir "$R/svg" > "$R/profile-tiled.txt" 2>&1
echo "profile rc=$?"; sed -n 2p "$R/profile-tiled.txt"; grep "attn/core" "$R/profile-tiled.txt" | head -2; rm -rf "$R/svg"; pack
XL1K=bwd2 xl1k
capeager small 256
pack; echo "done $(date -u +%T)"

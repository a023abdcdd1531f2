#!/usr/bin/env bash
# Session 50, call 272 (nvidia-h200): the tiled backward in one kind of block (five products
# a tile pair; ∂q summed over the key tiles in a fixed order through flags), against the
# two-kind one (MODEL_FLASH_BWD=pairs, a switch of this call's binary).
#   bench model-check (tiled rows, bar 3e-2; two runs of each backward bit-identical);
#   bench profile, xl bf16 at 8 x 1024, both (call 267: backward 32.30 ms a step);
#   xl, 8 x 1024, one GPU, both (call 267: 220.83 ms); small, 256 tokens, captured against
#   eager: the same bits; PyTorch compile-ro at xl 8 x 1024 (call 268: 224.72 ms).
# Copy into .gpu/ with train-runs.sh. Output: $OUT/c272.tgz.
CALL=c272; TABLE_ONLY=small; source "$(dirname "$0")/train-runs.sh"; export TMO=200
modelcheck "tiled\|fail\|error\|panick\|differ"
for v in one pairs; do
  MODEL_FLASH_BWD=$v timeout 120 bin/bench profile --size xl --dtype bf16 --context 1024 --out "$R/profile-$v.jsonl" --svg-dir "$R/svg" > "$R/profile-$v.txt" 2>&1
  echo "profile $v rc=$?"; sed -n 2p "$R/profile-$v.txt"; grep "attn/core" "$R/profile-$v.txt" | head -2; rm -rf "$R/svg"; pack
done
for v in one pairs; do
  ENVS="MODEL_FLASH_BWD=$v" train xl1k-$v /tmp/r-x xl 1 single 8 14 --fresh --context 1024 > /dev/null; rm -rf /tmp/r-x
  echo "xl 8x1024 $v: $(msc xl1k-$v 8 1024) ms; $(peak xl1k-$v)"
done
capeager small 256
TV=compile-ro torchc xl 1024
pack; echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Session 50, call 273 (nvidia-h200): call 272's two backwards at E = 128 (the 6.7B, Llama-
# shaped): bench profile at 8 x 1024 and `train run --eager` at 8 x 1024 (call 268: 621.05
# ms), the one-kind backward (five products, ordered ∂q sums) against MODEL_FLASH_BWD=pairs.
# Copy into .gpu/ with train-runs.sh. Output: $OUT/c273.tgz.
CALL=c273; TABLE_ONLY=6.7b; source "$(dirname "$0")/train-runs.sh"; export TMO=240
for v in one pairs; do
  MODEL_FLASH_BWD=$v timeout 150 bin/bench profile --size 6.7b --dtype bf16 --context 1024 --out "$R/profile-$v.jsonl" --svg-dir "$R/svg" > "$R/profile-$v.txt" 2>&1
  echo "profile $v rc=$?"; sed -n 2p "$R/profile-$v.txt"; grep "attn/core" "$R/profile-$v.txt" | head -2; tail -2 "$R/profile-$v.txt" | cut -c1-200; rm -rf "$R/svg"; pack
done
for v in one pairs; do
  ENVS="MODEL_FLASH_BWD=$v" train b67-$v /tmp/r-x 6.7b 1 single 8 12 --fresh --context 1024 --eager > /dev/null; rm -rf /tmp/r-x
  echo "6.7b 8x1024 eager $v: $(msc b67-$v 8 1024) ms; $(peak b67-$v)"
done
pack; echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Session 48, call 263 (nvidia-h200): the tiled attention with both tiles' loads issued
# before their stores (stage2), D made once by its own kernel, three blocks an SM at E <= 64.
#   bench model-check (the tiled attention's rows);
#   bench profile, xl bf16 at 8 x 1024: where the step's time goes, tiled and composed;
#   xl, 8 x 1024, one GPU: tiled against MODEL_ATTN_TILED=0 (call 262: 285.78 against 252.74).
# Copy into .gpu/ with train-runs.sh (msc, peak, torchc: its helpers since session 48). Output: $OUT/c263.tgz.
CALL=c263; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"; export TMO=200
modelcheck "tiled\|fail\|error"
for v in tiled off; do
  e=""; [ $v = off ] && e="MODEL_ATTN_TILED=0"
  env $e timeout 120 bin/bench profile --size xl --dtype bf16 --context 1024 --out "$R/profile-$v.jsonl" --svg-dir "$R/svg-$v" > "$R/profile-$v.txt" 2>&1
  echo "profile $v rc=$?"; head -14 "$R/profile-$v.txt"; grep "attn" "$R/profile-$v.txt"; pack
done
xl1k
pack; echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Session 48, call 263 (nvidia-h200): the tiled attention with both tiles' loads issued
# before their stores (stage2), D made once by its own kernel, three blocks an SM at E <= 64.
#   bench model-check (the tiled attention's rows);
#   bench profile, xl bf16 at 8 x 1024: where the step's time goes, tiled and composed;
#   xl, 8 x 1024, one GPU: tiled against MODEL_ATTN_TILED=0 (call 262: 285.78 against 252.74).
# Copy into .gpu/ with train-runs.sh. Output: $OUT/c263.tgz.
CALL=c263; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"; export TMO=200
msc() { python3 -c "
import json,statistics,sys
t=[json.loads(l) for l in open(sys.argv[1]) if '\"train\"' in l]
print(round(int(sys.argv[2])*int(sys.argv[3])/statistics.median(r['tokens_per_s'] for r in t if r['step']>=6)*1e3,2))" "$R/$1.log.jsonl" "$2" "$3" 2>/dev/null; }
peak() { grep -h 'peak GPU' "$R/$1.txt" | sort | tail -1 | cut -c1-70; grep -h "error" "$R/$1.txt" | head -2 | cut -c1-200; }
t0=$(date +%s); timeout 240 bin/bench model-check > "$R/model-check.txt" 2>&1; echo "model-check rc=$? ($(( $(date +%s) - t0 )) s)"
grep -i "tiled\|fail\|error" "$R/model-check.txt" | cut -c1-200; pack
for v in tiled off; do
  e=""; [ $v = off ] && e="MODEL_ATTN_TILED=0"
  env $e timeout 120 bin/bench profile --size xl --dtype bf16 --context 1024 --out "$R/profile-$v.jsonl" --svg-dir "$R/svg-$v" > "$R/profile-$v.txt" 2>&1
  echo "profile $v rc=$?"; head -14 "$R/profile-$v.txt"; grep "attn" "$R/profile-$v.txt"; pack
done
for v in tiled off; do
  e=""; [ $v = off ] && e="MODEL_ATTN_TILED=0"
  ENVS="$e" train xl1k-$v /tmp/r-x xl 1 single 8 14 --fresh --context 1024 > /dev/null; rm -rf /tmp/r-x
  echo "xl 8x1024 $v: $(msc xl1k-$v 8 1024) ms; $(peak xl1k-$v)"
done
pack; echo "done $(date -u +%T)"

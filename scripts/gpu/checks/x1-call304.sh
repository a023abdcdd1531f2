#!/usr/bin/env bash
# Session 55, call 304 (nvidia-h200): memplan::time's one-GPU figures again, in one call
# (they date from calls 125, 147 and 256, before sessions 53-54's kernels):
#   1. bench single at xl, 2.7B and 6.7B (bf16, 8 x 128 tokens, vocabulary 683): forward +
#      backward (--mode fwd-bwd) and the clipped step (--mode step --clip 1), captured;
#   2. the kernel tracer on `train run` xl at 8 x 128: AdamW's kernels a replay.
# Copy into .gpu/ with train-runs.sh and cupti/. Output: $OUT/c304.tgz.
CALL=c304; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"
for s in xl 2.7B 6.7B; do
  for m in "--mode fwd-bwd" "--mode step --clip 1"; do
    echo "--- $s $m ($(date -u +%T))"
    timeout 200 bin/bench single --size $s --dtype bf16 $m --batch 8 --vocab 683 --warmup 5 --steps 20 \
      --out "$R/single.jsonl" 2>&1 | tail -1 | cut -c1-200
  done; pack
done
python3 - "$R/single.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(r.get("size"), r.get("mode"), r.get("clip"), {k: v for k, v in r.items() if k.endswith("_ms") and not isinstance(v, dict)})
PY
trace1 xl128 xl 128 | grep -i "adamw\|period\|peak\|step" | head -10
pack; echo "done $(date -u +%T)"

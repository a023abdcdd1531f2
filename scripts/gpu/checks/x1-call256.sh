#!/usr/bin/env bash
# Session 47, call 256 (nvidia-h200): one GPU's forward + backward and clipped step at xl,
# 2.7B and 6.7B (bf16, 8 x 128 tokens, vocabulary 683 as train's data), for memplan::time's
# compute rate by shape (its projection takes xl's rate for every shape, and call 255's
# 6.7B at world 2 measured 107-109 ms where it projects 124-136).
export NCCL_NVLS_ENABLE=0
H="$(cd "$(dirname "$0")" && pwd)"; O="${OUT:-/tmp/out}"; mkdir -p "$O"
for z in "$H"/bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$O/gpu.txt"
for s in xl 2.7B 6.7B; do
  for m in "--mode fwd-bwd" "--mode step --clip 1"; do
    echo "--- $s $m ($(date -u +%T))"
    timeout 200 "$H/bin/bench" single --size $s --dtype bf16 $m --batch 8 --vocab 683 --warmup 5 --steps 20 \
      --out "$O/results.jsonl" 2>&1 | tail -1 | cut -c1-200
  done
done
python3 - "$O/results.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(r.get("size"), r.get("mode"), r.get("clip"), {k: v for k, v in r.items() if k.endswith("_ms") and not isinstance(v, dict)})
PY

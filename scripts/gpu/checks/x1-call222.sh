#!/usr/bin/env bash
# Session 40, call 222 (nvidia-h200), about a minute. Copy into .gpu/. bench contention after
# its timing body became one (pass_ms): a few of call 220's rows again, both passes.
set -u
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
O="${OUT:-/tmp/out}"; mkdir -p "$O"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$O/gpu.txt"
for phase in forward backward; do
  timeout 150 bin/bench contention --size xl --dtype bf16 --batch 8 --phase $phase --hog stream \
    --hog-sms 0,16 --sm-carveout 0,16 --hog-share 0.7 --warmup 3 --steps 12 \
    --out "$O/contention-$phase.jsonl" 2>&1 | grep -v "^\s*$" | tee "$O/contention-$phase.txt"
done
echo "done $(date -u +%T)"

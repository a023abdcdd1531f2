#!/usr/bin/env bash
# Session 40, call 224 (nvidia-h200), about 2 minutes. Copy into .gpu/. Call 223 showed the
# eager forward at 8 rows host-bound (13.9-20.6 ms between runs of one binary), so call 220's
# forward rows say nothing. At 32 rows the GPU's work outlasts the host's queueing: the
# forward beside a hog of 16 or 24 SMs, with and without the carve-out, twice.
set -u
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
O="${OUT:-/tmp/out}"; mkdir -p "$O"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$O/gpu.txt"
for k in 1 2; do
  echo "== run $k"
  timeout 200 bin/bench contention --size xl --dtype bf16 --batch 32 --phase forward --hog stream,spin \
    --hog-sms 0,16,24 --sm-carveout 0,16,24 --hog-share 0.7 --warmup 3 --steps 12 \
    --out "$O/contention-forward-b32-$k.jsonl" 2>&1 | grep -v "^\s*$" | cut -c1-130
done
echo "done $(date -u +%T)"

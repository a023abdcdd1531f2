#!/usr/bin/env bash
# Session 40, call 223 (nvidia-h200), about 2 minutes. Copy into .gpu/ with bin/bench-old.gz
# (bench built from 0136ba8, before pass_ms). Call 222's forward base (19.4-19.9 ms) sat
# 4-6 ms above its own rows (13.9-15.5); call 220's did not (13.42 against 13.31). The two
# binaries alternate, three times each, on the forward: same code path or not.
set -u
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
O="${OUT:-/tmp/out}"; mkdir -p "$O"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$O/gpu.txt"
for k in 1 2 3; do
  for b in bench-old bench; do
    echo "== $b ($k)"
    timeout 100 bin/$b contention --size xl --dtype bf16 --batch 8 --phase forward --hog stream \
      --hog-sms 0,16 --sm-carveout 0,16 --hog-share 0.7 --warmup 3 --steps 12 \
      --out "$O/contention-$b-$k.jsonl" 2>&1 | grep -v "^\s*$" | grep -v "size dtype" | cut -c1-130
  done
done
echo "done $(date -u +%T)"

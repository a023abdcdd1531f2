#!/usr/bin/env bash
# Session 40, call 220 (nvidia-h200), a few minutes. Copy into .gpu/. One GPU: what xl bf16's
# forward and backward lose while a kernel beside them holds 16-32 SMs (NCCL's gathers and
# reduce-scatters hold 24 at world 2: session 25, call 128), with the model's cuBLASLt GEMMs
# planned for every SM and for the SMs left (seam::gemm_sms now reaches them: Key::sms).
set -u
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
O="${OUT:-/tmp/out}"; mkdir -p "$O"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$O/gpu.txt"
for phase in forward backward; do
  for share in 0.7; do
    timeout 200 bin/bench contention --size xl --dtype bf16 --batch 8 --phase $phase --hog stream,spin \
      --hog-sms 0,16,24,32 --sm-carveout 0,16,24,32 --hog-share $share --warmup 3 --steps 12 \
      --out "$O/contention-$phase.jsonl" 2>&1 | grep -v "^\s*$" | tee "$O/contention-$phase.txt"
  done
done
echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Session 40's one-GPU contention calls (nvidia-h200), each a minute or two. Copy into .gpu/.
# What xl bf16's forward and backward lose while a kernel beside them holds SMs (NCCL's
# gathers and reduce-scatters hold 24 at world 2: session 25, call 128), with the model's
# cuBLASLt GEMMs planned for every SM and for the SMs left (seam::gemm_sms reaches them:
# Key::sms). The defaults are call 220; the others set:
#   call 222: HOGS=stream HOG_SMS=0,16 CARVEOUTS=0,16, twice (two device calls);
#   call 223: PHASES=forward HOGS=stream HOG_SMS=0,16 CARVEOUTS=0,16 RUNS=3
#             BINS="bench-old bench" (bin/bench-old.gz: bench built from 0136ba8);
#   call 224: PHASES=forward BATCH=32 HOG_SMS=0,16,24 CARVEOUTS=0,16,24 RUNS=2.
set -u
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
O="${OUT:-/tmp/out}"; mkdir -p "$O"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$O/gpu.txt"
for k in $(seq "${RUNS:-1}"); do
  for phase in ${PHASES:-forward backward}; do
    for b in ${BINS:-bench}; do
      echo "== $b $phase ($k)"
      timeout 200 bin/$b contention --size xl --dtype bf16 --batch "${BATCH:-8}" --phase $phase \
        --hog "${HOGS:-stream,spin}" --hog-sms "${HOG_SMS:-0,16,24,32}" \
        --sm-carveout "${CARVEOUTS:-0,16,24,32}" --hog-share 0.7 --warmup 3 --steps 12 \
        --out "$O/contention-$b-$phase-b${BATCH:-8}-$k.jsonl" 2>&1 | grep -v "^\s*$" | tee "$O/contention-$b-$phase-$k.txt"
    done
  done
done
echo "done $(date -u +%T)"

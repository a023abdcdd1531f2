#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/final-call44.sh`. Results: $OUT/call44.tgz.
# Session 10, call 44 (nvidia-h100-x1): train-speed at small and xl bf16 with the session's
# final binaries (one rank: no casts to the wire, ZeRO-1's norm in parameter order; DDP's
# AdamW inside the backward without clipping, which train-speed's clipped runs do not use):
# single, bucketed:25, zero1, bench single (one GEMM table per case) and the PyTorch
# trainer (compile-ro), all in this call.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R="${OUT:-/tmp/out}/call44"; mkdir -p "$R"
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader
OUT="$R" CASES="small:bf16 xl:bf16" TS_STRATEGIES="single bucketed:25 zero1" TS_TORCH="compile-ro" \
  timeout 555 bash run.sh train-speed 2>&1 | grep -E "^(size|xl|small) |rror|---"
tar czf "${OUT:-/tmp/out}/call44.tgz" -C "$(dirname "$R")" call44 && rm -rf "$R"
echo "=== end ($(date -u +%T))"

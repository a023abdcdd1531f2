#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/h200-call51.sh`. Results: $OUT/call51.tgz.
# Session 12, call 51 (asked for nvidia-h200; the card is printed first): train-speed at
# small and xl bf16 on the other kind issue 33's bar names, with call 44's binaries' code
# path: single, bucketed:25, zero1, bench single with and without clipping (one GEMM table
# per case) and the PyTorch trainer (compile-ro), all in this call.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R="${OUT:-/tmp/out}/call51"; mkdir -p "$R"
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,memory.total --format=csv,noheader | tee "$R/gpu.txt"
OUT="$R" CASES="small:bf16 xl:bf16" TS_STRATEGIES="single bucketed:25 zero1" TS_TORCH="compile-ro" \
  timeout 560 bash run.sh train-speed 2>&1 | grep -E "^(size|xl|small) |rror|---"
tar czf "${OUT:-/tmp/out}/call51.tgz" -C "$(dirname "$R")" call51 && rm -rf "$R"
echo "=== end ($(date -u +%T))"

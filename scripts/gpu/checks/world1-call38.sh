#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/world1-call38.sh`. Results: $OUT/call38.tgz.
# Session 10, call 38 (nvidia-h100-x1): train-speed at small and xl bf16 after DDP and ZeRO-1
# on one rank stopped casting f32 gradients to the bf16 wire; single, bucketed:25, zero1,
# bench single (one GEMM table per case), and the PyTorch trainer (compile-ro), all in this
# call. Graph kernel counts in the train records.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R="${OUT:-/tmp/out}/call38"; mkdir -p "$R"
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader
OUT="$R" CASES="small:bf16 xl:bf16" TS_STRATEGIES="single bucketed:25 zero1" TS_TORCH="compile-ro" \
  timeout 555 bash run.sh train-speed 2>&1 | grep -E "^(size|xl|small) |rror|---"
cp -r "$R" /tmp/keep38 2>/dev/null
tar czf "${OUT:-/tmp/out}/call38.tgz" -C "$(dirname "$R")" call38 && rm -rf "$R"
echo "=== end ($(date -u +%T))"

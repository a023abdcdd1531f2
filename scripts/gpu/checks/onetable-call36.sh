#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/onetable-call36.sh`. Results: $OUT/call36.tgz.
# Session 9, call 36 (nvidia-h100-x1): train-speed with one GEMM table per case (the first
# train run's, given to the other runs and to bench single) and bench single on train's
# model (683 tokens): small bf16, xl bf16, xl fp32; single, bucketed:25, zero1; no PyTorch.
# First a round trip of bench single --save-gemm-choices / --gemm-choices (small bf16).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R="${OUT:-/tmp/out}/call36"; mkdir -p "$R"
bin/bench single --size small --dtype bf16 --mode step --steps 3 --save-gemm-choices "$R/small.json" --out "$R/rt.jsonl" > /dev/null 2>&1; echo "save rc $?"
bin/bench single --size small --dtype bf16 --mode step --steps 3 --gemm-choices "$R/small.json" --out "$R/rt.jsonl" 2>&1 | grep -E "GEMM algorithms|rror"
OUT="$R" CASES="small:bf16 xl:bf16 xl:fp32" TS_STRATEGIES="single bucketed:25 zero1" TS_TORCH=" " \
  bash run.sh train-speed 2>&1 | grep -E "^(size|xl|small) |rror|GEMM"
tar czf "${OUT:-/tmp/out}/call36.tgz" -C "$(dirname "$R")" call36 && rm -rf "$R"
echo "=== end ($(date -u +%T))"

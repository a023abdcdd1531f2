#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/vocab-call31.sh CASES`. Results: $OUT/call31.tgz.
# Session 9, calls 31-32 (nvidia-h100-x1): train-speed with bench single on the model train
# runs (the data's vocabulary, 683 tokens; until now bench single ran the sizes' 10,000),
# strategies single, bucketed:25 and zero1 over NCCL at world 1; no PyTorch (the trainer
# anchor already ran train's model). Call 31: small:bf16 xl:bf16; call 32: xl:fp32.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R="${OUT:-/tmp/out}/call31"; mkdir -p "$R"
OUT="$R" CASES="$1" TS_STRATEGIES="single bucketed:25 zero1" TS_TORCH=" " \
  bash run.sh train-speed 2>&1 | grep -E "^(size|xl|small) |rror|vocabulary"
tar czf "${OUT:-/tmp/out}/call31.tgz" -C "$(dirname "$R")" call31 && rm -rf "$R"
echo "=== end ($(date -u +%T))"

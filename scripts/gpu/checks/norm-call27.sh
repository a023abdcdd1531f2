#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/norm-call27.sh`. Results: $OUT/call27.tgz.
# Session 9, call 27 (nvidia-h100-x1): the clipping norm's kernel reads the gradients as one
# run of 16-byte vectors (flat) instead of tensor after tensor (tensorwise, the earlier one).
# 1. bench gradnorm: the pass alone at xl bf16, xl fp32, small bf16, both layouts.
# 2. train-speed at xl bf16 (no PyTorch) with the flat kernel, then with
#    SEAM_GRADNORM=tensorwise: each with its own bench single baseline.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R="${OUT:-/tmp/out}/call27"; mkdir -p "$R"
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
echo "=== gradnorm ($(date -u +%T))"
for c in xl:bf16 xl:fp32 small:bf16; do
  bin/bench gradnorm --size "${c%%:*}" --dtype "${c##*:}" --iters 50 --out "$R/gradnorm.jsonl" | tail -2
done
for lay in flat tensorwise; do
  echo "=== train-speed xl bf16, $lay ($(date -u +%T))"
  st="single bucketed:25 zero1"; [ $lay = tensorwise ] && st="single zero1"
  SEAM_GRADNORM=$lay OUT="$R/$lay" CASES="xl:bf16" TS_STRATEGIES="$st" TS_TORCH=" " \
    bash run.sh train-speed 2>&1 | grep -E "^(size|xl) |rror"
done
tar czf "${OUT:-/tmp/out}/call27.tgz" -C "$(dirname "$R")" call27 && rm -rf "$R"
echo "=== end ($(date -u +%T))"

#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/accum-call79.sh`. Results: $OUT/call79/.
# Session 16, call 79 (nvidia-h100-x1): issue 48's small bf16 bar on an H100, as call 77
# ran it on an H200 (0.693x PyTorch there; 0.719x on an H100 in call 64, before the sums
# moved into the GEMMs and many to a launch).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
C="${CALL:-call79}"; R="${OUT:-/tmp/out}/$C"; mkdir -p "$R"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$R/gpu.txt"
OUT="$R" CASES="small:bf16" TS_WORLDS=1 TS_STRATEGIES=single TS_ACCUM="1 4" TS_TORCH=compile-ro TS_STEPS=30 \
  bash ./run.sh train-speed > "$R/train-speed.txt" 2>&1
grep -E "^size|^small|accum bar" "$R/train-speed.txt" | tail -12
rm -rf "$R/train-speed/data"
echo "=== end ($(date -u +%T))"

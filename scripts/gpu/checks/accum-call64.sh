#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/accum-call64.sh`. Results: $OUT/call64/.
# Session 14, call 64 (nvidia-h100-x2, one of its GPUs), issue 48's bars: small and xl bf16,
# `train run --strategy single` with --accum 1 and 4 (micro-batches of 8 x 128) beside the
# PyTorch trainer (compile-ro) at the same global batches, and bench single's clipped step
# and forward-backward for the bar's arithmetic. Since call 63 (xl --accum 4: 176.06 ms,
# 1.345x the bar's 130.86): the sums' kernel moves 16 bytes per thread, the first two
# micro-batches are summed in one pass into a new buffer (8 bytes per element, not a cast
# then an add), and DDP/ZeRO-1 fold the 1/k into the last sum. Expected xl --accum 4:
# about 150-155 ms (4 B/element of the old 36 saved per step, and the kernel near 3 TB/s).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
C="${CALL:-call64}"; R="${OUT:-/tmp/out}/$C"; mkdir -p "$R"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$R/gpu.txt"
OUT="$R" CASES="small:bf16 xl:bf16" TS_WORLDS=1 TS_STRATEGIES=single TS_ACCUM="1 4" TS_TORCH=compile-ro TS_STEPS=30 \
  bash ./run.sh train-speed > "$R/train-speed.txt" 2>&1
grep -E "^--- |^size|^small|^xl|accum bar" "$R/train-speed.txt" | tail -40
rm -rf "$R/train-speed/data"
echo "=== end ($(date -u +%T))"

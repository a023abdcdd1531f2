#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/accum-call78.sh`. Results: $OUT/call78/.
# Session 16, call 78 (nvidia-h100-x1: an H100, the card issue 48 was measured on): xl
# bf16 issue 48's bars as call 77 ran them on an H200 (0.757x PyTorch there, 1.093x the
# arithmetic); then a CUPTI trace of train run --accum 4 and --accum 1, where the 11.5 ms
# over the arithmetic goes (expected: the weight-gradient GEMMs' f32 epilogues, ~20 bytes a
# parameter a step more than bf16 outputs, and AdamW and the norm reading f32 sums).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
C="${CALL:-call78}"; R="${OUT:-/tmp/out}/$C"; mkdir -p "$R"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$R/gpu.txt"
OUT="$R" CASES="xl:bf16" TS_WORLDS=1 TS_STRATEGIES=single TS_ACCUM="1 4" TS_TORCH=compile-ro TS_STEPS=30 \
  bash ./run.sh train-speed > "$R/train-speed.txt" 2>&1
grep -E "^size|^xl|accum bar" "$R/train-speed.txt" | tail -12
rm -rf "$R/train-speed/data"
for a in 4 1; do
  OUT="$R" TRACE_STRATEGIES=single TRACE_ACCUM=$a bash ./run.sh trace > "$R/trace-job-a$a.txt" 2>&1
done
cat "$R/trace.txt"
echo "=== end ($(date -u +%T))"

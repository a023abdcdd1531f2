#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/accum-call77.sh`. Results: $OUT/call77/.
# Session 16, call 77 (nvidia-h100-x2, one of its GPUs), issue 48's bars: small and xl
# bf16, `train run --strategy single` with --accum 1 and 4 (micro-batches of 8 x 128)
# beside the PyTorch trainer (compile-ro) at the same global batches, and bench single's
# clipped step and forward-backward for the bar's arithmetic; `bench model-check` first
# (now with seam::accum on the GPU against the host). Call 75 (nvidia-h200-x2, weight
# gradients summed in their GEMMs): xl --accum 4 135.21 ms = 0.753x PyTorch (bar 0.75),
# 1.095x the arithmetic; small 12.48 ms = 0.701x (bar 0.70). Since: a micro-batch's
# remaining sums (the norms' weights, ~97 at xl, ~25 at small) go many to a launch
# (kernels/accum.cu accum_many_*), where each was a kernel. Expected: xl --accum 4 about
# 0.5 ms less (~290 of 5506 kernels gone), small about 0.15 ms less.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
C="${CALL:-call77}"; R="${OUT:-/tmp/out}/$C"; mkdir -p "$R"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$R/gpu.txt"
timeout 150 bin/bench model-check > "$R/model-check.txt" 2>&1; echo "model-check rc $?"
grep -c ": OK" "$R/model-check.txt"; grep -E "weight_grad_sum|rror|FAIL" "$R/model-check.txt" | head -5
OUT="$R" CASES="small:bf16 xl:bf16" TS_WORLDS=1 TS_STRATEGIES=single TS_ACCUM="1 4" TS_TORCH=compile-ro TS_STEPS=30 \
  bash ./run.sh train-speed > "$R/train-speed.txt" 2>&1
grep -E "^--- |^size|^small|^xl|accum bar" "$R/train-speed.txt" | tail -40
rm -rf "$R/train-speed/data"
echo "=== end ($(date -u +%T))"

#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/accum-call75.sh`. Results: $OUT/call75/.
# Session 16, call 75 (nvidia-h100-x2, one of its GPUs), issue 48's bars: small and xl
# bf16, `train run --strategy single` with --accum 1 and 4 (micro-batches of 8 x 128)
# beside the PyTorch trainer (compile-ro) at the same global batches, and bench single's
# clipped step and forward-backward for the bar's arithmetic; `bench model-check` first
# (it now checks gemm::weight_grad_sum). Since call 64 (xl --accum 4 153.00 ms, 1.171x the
# arithmetic; small 14.17 ms, 0.719x PyTorch): the block's five weight gradients are
# summed into the step's f32 sums inside their GEMMs (cuBLASLt epilogue, beta = alpha =
# scale, C = D), where a separate pass read and wrote each sum. Expected: xl --accum 4
# 142-147 ms (some 10 of the ~15 ms the passes took, the epilogue's traffic partly hidden
# under the GEMMs' math); small --accum 4 about 13.6 ms (180 of ~265 kernels gone).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
C="${CALL:-call75}"; R="${OUT:-/tmp/out}/$C"; mkdir -p "$R"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$R/gpu.txt"
timeout 150 bin/bench model-check > "$R/model-check.txt" 2>&1; echo "model-check rc $?"
grep -c ": OK" "$R/model-check.txt"; grep -E "weight_grad_sum|rror|FAIL" "$R/model-check.txt" | head -5
OUT="$R" CASES="small:bf16 xl:bf16" TS_WORLDS=1 TS_STRATEGIES=single TS_ACCUM="1 4" TS_TORCH=compile-ro TS_STEPS=30 \
  bash ./run.sh train-speed > "$R/train-speed.txt" 2>&1
grep -E "^--- |^size|^small|^xl|accum bar" "$R/train-speed.txt" | tail -40
rm -rf "$R/train-speed/data"
echo "=== end ($(date -u +%T))"

#!/usr/bin/env bash
# Session 42, call 235 (nvidia-h200): the one-GPU step on the user's path after sessions 40-41
# (model::gemm's SM-target keys, comm's new adds kernel): `train run` single, `bench single`
# with and without clipping, and PyTorch's compile-ro trainer, xl bf16, 8 x 128 tokens.
export NCCL_NVLS_ENABLE=0; mkdir -p "$OUT/c"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/c/gpu.txt"
CASES=xl:bf16 TS_WORLDS=1 TS_STEPS=30 TS_STRATEGIES=single OUT="$OUT/c" timeout 540 bash .gpu/run.sh train-speed 2>&1 \
  | tee "$OUT/c/log.txt" | grep -v "^\[rank" | cut -c1-220 | tail -12
rm -rf "$OUT/c/train-speed/data" "$OUT/c/train-speed/run-"*

#!/usr/bin/env bash
# Session 55, call 305 (nvidia-h200-x2): issue 47's world-2 rows as the issue asks for
# them, from the packed folder (copy this into .gpu/): `run.sh train-speed` at worlds 1 and
# 2, single, bucketed:25 and zero1, beside `bench single --clip 1`, and PyTorch's trainer
# (DDP compile-ro and DDP eager) at world 2 in the same folder; xl bf16, 8 x 128 a GPU,
# clipping at 1.0, 30 steps. Binaries of 8573bd8 (this session: AdamW's side-stream cap for
# fp32, train's and comm-launch's refusals; the bf16 step as session 54 left it).
export NCCL_NVLS_ENABLE=0
H="$(cd "$(dirname "$0")" && pwd)"; O="${OUT:-/tmp/out}"; mkdir -p "$O/c"
export OUT="$O/c"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
CASES=xl:bf16 TS_WORLDS="1 2" TS_STEPS=30 TS_STRATEGIES="single bucketed:25 zero1" TS_TORCH="compile-ro eager" \
  TS_TORCH_WORLDS="2" TS_TORCH_PARALLEL=ddp \
  timeout 560 bash "$H/run.sh" train-speed 2>&1 | tee "$OUT/log.txt" | grep -v "^\[rank" | cut -c1-200 | tail -16
rm -rf "$OUT/train-speed/data" "$OUT/train-speed/run-"*; tar czf "$O/c.tgz" -C "$O" c
echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Session 57, call 319 (nvidia-h200-x2): issue 47's world-2 rows as the issue asks for them
# (run.sh train-speed, TS_WORLDS="1 2", xl bf16, 8 x 128 a GPU, clipping at 1.0, 30 steps)
# with this session's binaries (split DDP's late gathers, K = 4 by default), and PyTorch's
# DDP compile-ro at world 2 (its fastest in calls 305-306) last. Output: $OUT/c.tgz.
export NCCL_NVLS_ENABLE=0
H="$(cd "$(dirname "$0")" && pwd)"; O="${OUT:-/tmp/out}"; mkdir -p "$O/c"
export OUT="$O/c"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
CASES=xl:bf16 TS_WORLDS="1 2" TS_STEPS=30 TS_STRATEGIES="single bucketed:25 zero1" TS_TORCH_WORLDS=2 TS_TORCH=compile-ro \
  timeout 550 bash "$H/run.sh" train-speed 2>&1 | tee "$OUT/log.txt" | grep -v "^\[rank" | cut -c1-200 | tail -16
rm -rf "$OUT/train-speed/data" "$OUT/train-speed/run-"*; tar czf "$O/c.tgz" -C "$O" c
echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Session 54, call 302 (nvidia-h200): the one-GPU row of issue 33's bar with this session's
# AdamW and RMSNorm kernels, as run.sh's train-speed job takes it: xl bf16, 8 x 128, bench
# single (without and with clipping), `train run` single, and PyTorch's trainer compile-ro,
# 40 steps each, in one call. Output: $OUT (results.jsonl, the table).
export NCCL_NVLS_ENABLE=0
CASES=xl:bf16 TS_WORLDS=1 TS_STRATEGIES=single bash "$(dirname "$0")/run.sh" train-speed 2>&1 | tail -15

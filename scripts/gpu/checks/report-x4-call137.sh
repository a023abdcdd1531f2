#!/usr/bin/env bash
# Call 137 (session 26), FOUR GPUs, from the packed folder: the 4-GPU report's first half
# (issue 47, item 4), at the code of this session: the all-reduce sweep at 2 and 4 ranks with
# PyTorch's beside it, then `run.sh train-speed` at xl bf16, 8 x 128 tokens a GPU, every
# strategy at worlds 1, 2 and 4, `bench single` (without and with --clip 1) on the same GEMM
# table, and PyTorch's fastest multi-GPU trainer (DDP compile-ro; FSDP2 compile-blocks took
# 293.60 ms in call 82 against DDP's 132.74, and 6 minutes to run) at world 4.
# Output: $OUT/c (results.jsonl, torch.jsonl, train-speed/), read by `bench report`.
export NCCL_NVLS_ENABLE=0
H="$(cd "$(dirname "$0")" && pwd)"
export OUT="${OUT:-/tmp/out}/c"; mkdir -p "$OUT"
ALLREDUCE_ARGS="--ranks 2,4" CASES=xl:bf16 TS_WORLDS="1 2 4" \
  TS_STRATEGIES="single bucketed:25 zero1 zero2 fsdp" TS_TORCH_WORLDS=4 TS_TORCH_PARALLEL=ddp \
  bash "$H/run.sh" allreduce anchor-allreduce train-speed
rm -rf "$OUT/train-speed/data"

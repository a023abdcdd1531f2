#!/usr/bin/env bash
# The first half of a multi-GPU report (issue 47, item 4), from the packed folder, on the G GPUs
# of the machine (2 or 4): the all-reduce sweep at 2 (and 4) ranks with PyTorch's beside it,
# `run.sh train-speed` at xl bf16, 8 x 128 tokens a GPU, every strategy at worlds 1 to G,
# `bench single` without and with --clip 1 on the same GEMM table, and PyTorch's trainer
# (compile-ro; DDP above world 1) at worlds TORCH_WORLDS ("1 2" on 2 GPUs; "2 4" on 4, where
# report-x4-next-b.sh runs world 1). Output: $OUT/c (results.jsonl, torch.jsonl,
# train-speed/), read by `bench report`.
export NCCL_NVLS_ENABLE=0
H="$(cd "$(dirname "$0")" && pwd)"
export OUT="${OUT:-/tmp/out}/c"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
case "$(nvidia-smi -L | wc -l)" in
  2) ranks=2; worlds="1 2"; torch="${TORCH_WORLDS:-1 2}" ;;
  4) ranks=2,4; worlds="1 2 4"; torch="${TORCH_WORLDS:-2 4}" ;;
  *) echo "report-a.sh: for 2 or 4 GPUs"; exit 2 ;;
esac
ALLREDUCE_ARGS="--ranks $ranks" CASES=xl:bf16 TS_WORLDS="$worlds" \
  TS_STRATEGIES="single bucketed:25 zero1 zero2 fsdp" TS_TORCH_WORLDS="$torch" TS_TORCH_PARALLEL=ddp \
  bash "$H/run.sh" allreduce anchor-allreduce train-speed 2>&1 | tee "$OUT/log.txt" | grep -v "^\[rank"
rm -rf "$OUT/train-speed/data"

#!/usr/bin/env bash
# Session 33, call 180: FOUR GPUs (nvidia-h200-x4), from the packed folder (copy this and
# train-runs.sh into .gpu/). About 8 minutes. Issue 47's 8-row bars with DDP's split
# all-reduce the default at worlds 2 and 4: `run.sh train-speed` at xl bf16, 8 x 128 tokens a
# GPU, single, bucketed:25 and zero1 at worlds 1, 2 and 4, `bench single` with and without
# --clip 1 (into c/); bucketed:25 at world 4 with 32 rows beside one GPU's; last, PyTorch's
# trainer, DDP eager, at worlds 2 and 4 (never run before beside the report).
export NCCL_NVLS_ENABLE=0
H="$(cd "$(dirname "$0")" && pwd)"
O="${OUT:-/tmp/out}"; export OUT="$O/c"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
CASES=xl:bf16 TS_WORLDS="1 2 4" TS_STEPS=30 TS_STRATEGIES="single bucketed:25 zero1" TS_TORCH_WORLDS="9" \
  bash "$H/run.sh" train-speed 2>&1 | tee "$OUT/log.txt" | grep -v "^\[rank" | cut -c1-300
rm -rf "$OUT/train-speed/data"; tar czf "$O/c.tgz" -C "$O" c
( OUT=$O; CALL=rows32; source "$H/train-runs.sh"; export TMO=90
  train single32 /tmp/r-s32 xl 1 single 32 20 --fresh
  train b4s32 /tmp/r-b4s32 xl 4 bucketed:25 128 20 --fresh
  pack )
( OUT=$O; CALL=torch180; source "$H/train-runs.sh"; export TTMO=110
  torch xl eager 30 ddp 4
  torch xl eager 30 ddp 2
  pack )
echo "done $(date -u +%T)"

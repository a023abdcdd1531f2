#!/usr/bin/env bash
# Ran as session 31's call 169 (nvidia-h200-x4), FOUR GPUs: the 4-GPU report's second half
# (see report-x4-next-a.sh): `run.sh train-speed` at xl bf16, 32 x 128 tokens a GPU (single,
# bucketed:25 and zero1 at worlds 1 and 4; bench single on the same table; PyTorch DDP
# compile-ro at world 4), then PyTorch's trainer (compile-ro) at 8 x 128 tokens a GPU at
# world 1, on data that `train prepare` makes again (train-speed deletes its own).
# Output: $OUT/c.
export NCCL_NVLS_ENABLE=0
H="$(cd "$(dirname "$0")" && pwd)"
export OUT="${OUT:-/tmp/out}/c"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
TS_BATCH=32 CASES=xl:bf16 TS_WORLDS="1 4" TS_STRATEGIES="single bucketed:25 zero1" \
  TS_TORCH_WORLDS=4 TS_TORCH_PARALLEL=ddp bash "$H/run.sh" train-speed 2>&1 | tee "$OUT/log.txt" | grep -v "^\[rank"
D=/tmp/d150; "$H/bin/train" prepare --data "$D" > /dev/null 2>&1
echo "--- xl bf16: torch_train_best compile-ro, world 1, 8 x 128 ($(date -u +%T))"
timeout 170 python3 "$H/anchors/torch_train_best.py" "$D" xl --dtype bf16 --variant compile-ro --parallel ddp \
  --global-batch 8 --accum 1 --steps 60 2> "$OUT/torch-w1-b8.err" | grep '^{' | tee -a "$OUT/torch.jsonl" | cut -c1-300
echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Call 138 (session 26), FOUR GPUs: the 4-GPU report's second half (see
# report-x4-call137.sh): `run.sh train-speed` at xl bf16, 32 x 128 tokens a GPU
# (single, bucketed:25 and zero1 at worlds 1 and 4; bench single on the same table;
# PyTorch DDP compile-ro at world 4), then PyTorch's one-GPU trainer (compile-ro) at
# 8 x 128, which call 137 had no time for. Output: $OUT/c.
# As run, that last line found no data (train-speed deletes its data when it ends); call 139
# ran it, and DDP at world 2, after `bin/train prepare` (docs/results/report-h200x4-s26/README.md).
export NCCL_NVLS_ENABLE=0
H="$(cd "$(dirname "$0")" && pwd)"
export OUT="${OUT:-/tmp/out}/c"; mkdir -p "$OUT"
TS_BATCH=32 CASES=xl:bf16 TS_WORLDS="1 4" TS_STRATEGIES="single bucketed:25 zero1" \
  TS_TORCH_WORLDS=4 TS_TORCH_PARALLEL=ddp bash "$H/run.sh" train-speed
D="$OUT/train-speed/data"
echo "--- xl bf16: torch_train_best compile-ro, world 1, 8 x 128 ($(date -u +%T))"
python3 "$H/anchors/torch_train_best.py" "$D" xl --dtype bf16 --variant compile-ro --parallel ddp \
  --global-batch 8 --accum 1 --steps 60 2> "$OUT/torch-w1-b8.err" | grep '^{' | tee -a "$OUT/torch.jsonl"
rm -rf "$D"

#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/world2-call60.sh`. Results: $OUT/call60.tgz.
# Session 13, call 60 (nvidia-h100-x2 asked for; the reply names the kind), xl bf16,
# batch 8 x 128 per GPU. torch_train_best's DDP took 2.27x (compile-ro, call 58) and 2.70x
# (compile, call 59) its one-GPU step: is eager PyTorch DDP (SDPA, fused AdamW, no
# torch.compile) the stronger one at world 2? In one call: ours (run.sh train-speed,
# TS_WORLDS="1 2", no PyTorch there), then torch_train_best eager at world 2 and 1, and
# compile-ro at world 2.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
C="${CALL:-call60}"; R="${OUT:-/tmp/out}/$C"; mkdir -p "$R"
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,memory.total --format=csv,noheader | tee "$R/gpu.txt"
OUT="$R" CASES="xl:bf16" TS_WORLDS="1 2" TS_STRATEGIES="single bucketed:25 zero1" TS_TORCH=" " \
  timeout 200 bash run.sh train-speed 2>&1 | tee "$R/train-speed.txt" | grep -E "^(size|xl|small) |rror|---"
D=/tmp/d60; bin/train prepare --data "$D" > /dev/null 2>&1
tt() { # variant world
  echo "=== torch_train_best $1, world $2 ($(date -u +%T))"
  local py=(python3); [ "$2" -gt 1 ] && py=(python3 -m torch.distributed.run --standalone --nproc_per_node "$2")
  timeout "$3" "${py[@]}" anchors/torch_train_best.py "$D" xl --dtype bf16 --variant "$1" --global-batch $((8 * $2)) \
    --steps 60 2> "$R/torch-$1-w$2.err" | grep '^{' | tee -a "$R/torch.jsonl"
}
tt eager 2 90
tt eager 1 80
tt compile-ro 2 170
rm -rf "$R/train-speed/data" "$D"
tar czf "${OUT:-/tmp/out}/$C.tgz" -C "$(dirname "$R")" "$C" && rm -rf "$R"
echo "=== end ($(date -u +%T))"

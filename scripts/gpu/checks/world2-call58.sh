#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/world2-call58.sh` (CALL=call59 TS_TORCH=compile ... for the second call).
# Results: $OUT/$CALL.tgz.
# Session 13, calls 58-59 (nvidia-h100-x2 or nvidia-h200-x2: the reply names the kind):
# the one step at world 2 against PyTorch's DDP trainer, xl bf16, batch 8 x 128 per GPU.
# run.sh train-speed with TS_WORLDS="1 2": bench single and `train run` at world 1, then
# bucketed:25 and zero1 at world 2 under comm-launch, and torch_train_best.py at world 1
# and as DDP at world 2 under torchrun, all in this call.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
C="${CALL:-call58}"; R="${OUT:-/tmp/out}/$C"; mkdir -p "$R"
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,memory.total --format=csv,noheader | tee "$R/gpu.txt"
nvidia-smi topo -m > "$R/topo.txt" 2>&1
OUT="$R" CASES="${CASES:-xl:bf16}" TS_WORLDS="${TS_WORLDS:-1 2}" TS_STRATEGIES="${TS_STRATEGIES:-single bucketed:25 zero1}" \
  TS_TORCH="${TS_TORCH:-compile-ro}" timeout "${LIMIT:-540}" bash run.sh train-speed 2>&1 | tee "$R/train-speed.txt" | grep -E "^(size|xl|small) |rror|---"
rm -rf "$R/train-speed/data"
tar czf "${OUT:-/tmp/out}/$C.tgz" -C "$(dirname "$R")" "$C" && rm -rf "$R"
echo "=== end ($(date -u +%T))"

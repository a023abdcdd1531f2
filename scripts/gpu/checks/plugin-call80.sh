#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/plugin-call80.sh`. Results: $OUT/call80/.
# Session 16, call 80 (nvidia-h100-x2 or nvidia-h200-x2): the strategies as plug-ins
# (step::Strategy; the Sync enum and its match arms gone) on the GPU. Expected: nothing
# moves. bench model-check (its graph check captures Local, Ddp and Zero1Overlap steps and
# compares 10 replays with 10 eager steps), bench zero1-check at world 2 (a ZeRO-1 run
# saved, resumed, equal to an uninterrupted one), and train run xl bf16 at worlds 1 and 2
# for single, bucketed:25, zero1 and sharded (eager), to set beside call 76's steps on the
# same card kind (single 42.01, bucketed:25 w2 50.11, zero1 w2 43.92 ms on nvidia-h200-x2).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
C="${CALL:-call80}"; R="${OUT:-/tmp/out}/$C"; mkdir -p "$R"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$R/gpu.txt"
timeout 150 bin/bench model-check > "$R/model-check.txt" 2>&1; echo "model-check rc $?"
grep -c ": OK" "$R/model-check.txt"; grep -iE "graph|rror|FAIL" "$R/model-check.txt" | head -8
OUT="$R" bash ./run.sh zero1-check > "$R/zero1-check.txt" 2>&1; echo "zero1-check rc $?"; tail -4 "$R/zero1-check.txt"
OUT="$R" CASES="xl:bf16" TS_WORLDS="1 2" TS_STRATEGIES="single bucketed:25 zero1 sharded" TS_TORCH=" " TS_STEPS=30 \
  bash ./run.sh train-speed > "$R/train-speed.txt" 2>&1
grep -E "^size|^xl" "$R/train-speed.txt" | tail -14
rm -rf "$R/train-speed/data" "$R/zero1-ckpt"
echo "=== end ($(date -u +%T))"

#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/world2-call76.sh`. Results: $OUT/call76/.
# Session 16, call 76 (nvidia-h100-x2): issue 48's world-2 bar in one call: xl bf16
# `train run` with --accum 1 and 4 (8 x 128 per GPU and micro-batch), single at world 1,
# bucketed:25 and zero1 (400 MB buckets, the default) at world 2; each --accum 4 step over
# its own world's --accum 1 step must stay within 5 % of world 1's ratio. Their no_sync
# micro-batches now sum the weight gradients in the GEMMs as single does (call 75).
# Then issue 47: a CUPTI trace of one replay of zero1 (400 MB) and bucketed:25 at world 2,
# where the remaining step goes (call 68 traced zero1 with 25 MB buckets only).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
C="${CALL:-call76}"; R="${OUT:-/tmp/out}/$C"; mkdir -p "$R"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$R/gpu.txt"
OUT="$R" CASES="xl:bf16" TS_WORLDS="1 2" TS_STRATEGIES="single bucketed:25 zero1" TS_ACCUM="1 4" TS_TORCH=" " TS_STEPS=30 \
  bash ./run.sh train-speed > "$R/train-speed.txt" 2>&1
grep -E "^size|^xl|accum bar" "$R/train-speed.txt" | tail -20
rm -rf "$R/train-speed/data"
OUT="$R" TRACE_STRATEGIES="zero1 bucketed:25" TRACE_WORLD=2 bash ./run.sh trace > "$R/trace-job.txt" 2>&1
tail -60 "$R/trace.txt"
echo "=== end ($(date -u +%T))"

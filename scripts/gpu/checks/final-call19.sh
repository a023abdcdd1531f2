#!/usr/bin/env bash
# Runs from the packed folder (the build of call 18): copy this file into .gpu/, then on the
# device `bash .gpu/final-call19.sh`.
# Session 7, call 19 (nvidia-h100-x1): train-speed at small bf16 and xl fp32 (bench single
# with and without clipping; train run single, bucketed:25, zero1 over NCCL at world 1;
# the PyTorch trainer compile-ro), then train-parity (ours and the PyTorch trainer from the
# same weights, fp32 and bf16, 2000 steps of `small`). All in this call.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
echo "=== train-speed ($(date -u +%T))"
CASES="small:bf16 xl:fp32" TS_STRATEGIES="single bucketed:25 zero1" TS_TORCH="compile-ro" bash run.sh train-speed 2>&1 | grep -E "^(size|xl|small) "
echo "=== train-parity ($(date -u +%T))"
bash run.sh train-parity 2>&1 | tail -12
echo "=== end ($(date -u +%T))"

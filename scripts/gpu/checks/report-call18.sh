#!/usr/bin/env bash
# Runs from the packed folder: `cargo xtask gpu-pack`, copy this file into .gpu/, then on the
# device `bash .gpu/report-call18.sh`.
# Session 7, call 18 (nvidia-h100-x1): model-check (the norm kernel against the host's,
# graph = eager for every sync), then `run.sh full` on one GPU, what `cargo xtask bench
# --gpus 1` runs: bench single, ddp and zero1 at NCCL world 1, profile, the PyTorch
# anchors (single, best compile-ro, ddp, zero; no all-reduce on one GPU), train-speed at xl
# bf16 (single, bucketed:25, zero1, the PyTorch trainer compile-ro), the report
# ($OUT/report.tgz). Everything in this call.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
echo "=== model-check ($(date -u +%T))"
bash run.sh model-check 2>&1 | grep -E "CUDA graph, (Ddp|Zero1)|gradient norm|FAIL|rror" | sed 's/TrainStep, 1 eager.*vs 10 eager steps of the same TrainStep, //'
echo "=== full ($(date -u +%T))"
FULL_CASES="xl:bf16" bash run.sh full > "$OUT/full.log" 2>&1; echo "full rc=$?"
grep -E "^(--- |=== )|FAIL|rror|^(size|xl|small) " "$OUT/full.log" | tail -40
echo "=== end ($(date -u +%T))"

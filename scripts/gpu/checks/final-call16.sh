#!/usr/bin/env bash
# Runs from the packed folder: `cargo xtask gpu-pack`, copy this file into .gpu/, then on the
# device `bash .gpu/final-call16.sh` (it cds to its own folder and uses bin/ and run.sh).
# Session 6, call 16 (nvidia-h100-x1), the final build: on one rank every gradient goes
# alone (no flat buffers: nothing to batch) and identity collectives are not launched.
# Graph = eager for every sync, zero1-check, then train-speed at xl bf16 and small bf16
# (single, bucketed:25, zero1, the PyTorch trainer), all in this call.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
bash run.sh model-check 2>&1 | grep -E "CUDA graph, (Ddp|Zero1)|FAIL|rror" | sed 's/TrainStep, 1 eager.*vs 10 eager steps of the same TrainStep, //'
bash run.sh zero1-check 2>&1 | grep zero1-check
CASES="xl:bf16 small:bf16" TS_STRATEGIES="single bucketed:25 zero1" TS_TORCH="compile-ro" bash run.sh train-speed 2>&1 | grep -E "^(size|xl|small) "

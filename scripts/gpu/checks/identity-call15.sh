#!/usr/bin/env bash
# Runs from the packed folder: `cargo xtask gpu-pack`, copy this file into .gpu/, then on the
# device `bash .gpu/identity-call15.sh` (it cds to its own folder and uses bin/ and run.sh).
# Session 6, call 15 (nvidia-h100-x1): one rank's in-place collectives are no longer
# launched (NcclComm::identity). Conformance and graph = eager again, then train-speed at
# xl bf16 and small bf16, and the same DDP and ZeRO-1 runs with COMM_NCCL_LAUNCH_IDENTITY=1
# (launched as before) in the same call, to measure what skipping them saves.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
bash run.sh selftest 2>&1 | grep conformance
bash run.sh model-check 2>&1 | grep -E "CUDA graph|validation graph|FAIL|rror" | sed 's/TrainStep, 1 eager.*vs 10 eager steps of the same TrainStep, //'
CASES="xl:bf16 small:bf16" TS_STRATEGIES="single bucketed:25 zero1" TS_TORCH="compile-ro" bash run.sh train-speed 2>&1 | grep -E "^(size|xl|small) " > ${OUT:-/tmp}/default.txt
mkdir -p ${OUT:-/tmp}/launched
OUT=${OUT:-/tmp}/launched COMM_NCCL_LAUNCH_IDENTITY=1 CASES="xl:bf16 small:bf16" TS_STRATEGIES="bucketed:25 zero1" TS_TORCH=" " bash run.sh train-speed 2>&1 | grep -E "^(xl|small) .*train run" | sed 's/train run \([a-z0-9:]*\) /train run \1, launched/' > ${OUT:-/tmp}/launched.txt
cat ${OUT:-/tmp}/default.txt ${OUT:-/tmp}/launched.txt

#!/usr/bin/env bash
# Runs from the packed folder: `cargo xtask gpu-pack`, copy this file into .gpu/, then on the
# device `bash .gpu/inplace-call13.sh` (it cds to its own folder and uses bin/ and run.sh).
# Session 6: ZeRO-1 with its large parameters sharded in place (no copies, no master), on
# one GPU: the collectives' in-place conformance on NCCL, graph = eager for every sync, and
# train-speed at xl bf16 (single, bucketed:25, zero1, the PyTorch trainer), one call.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
bash run.sh check 2>&1 | head -3
bash run.sh selftest 2>&1 | tail -3
bash run.sh model-check 2>&1 | grep -E "CUDA graph|validation graph|FAIL|rror" | sed 's/TrainStep, 1 eager.*vs 10 eager steps of the same TrainStep, //'
bash run.sh zero1-check 2>&1 | tail -3
CASES="${CASES:-xl:bf16}" TS_STRATEGIES="${TS_STRATEGIES:-single bucketed:25 zero1}" TS_TORCH="${TS_TORCH:-compile-ro}" bash run.sh train-speed 2>&1 | tail -12

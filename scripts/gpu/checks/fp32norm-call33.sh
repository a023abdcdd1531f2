#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/fp32norm-call33.sh`. Results: $OUT/call33.tgz.
# Session 9, call 33 (nvidia-h100-x1): where the clipping norm is taken at xl fp32, where
# the backward's GEMMs are SIMT and AdamW already runs on a second stream without clipping:
# STEP_NORM after (default), in-backward and side-stream; train-speed, single only, same
# model (bench single --vocab from the data), no PyTorch.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R="${OUT:-/tmp/out}/call33"; mkdir -p "$R"
for pl in after side-stream in-backward; do
  echo "=== STEP_NORM=$pl ($(date -u +%T))"
  STEP_NORM=$pl OUT="$R/$pl" CASES="xl:fp32" TS_STRATEGIES="single" TS_TORCH=" " \
    bash run.sh train-speed 2>&1 | grep -E "^(size|xl) |rror"
done
tar czf "${OUT:-/tmp/out}/call33.tgz" -C "$(dirname "$R")" call33 && rm -rf "$R"
echo "=== end ($(date -u +%T))"

#!/usr/bin/env bash
# Runs from the packed folder: `cargo xtask gpu-pack`, copy this file into .gpu/, then on the
# device `bash .gpu/norm-call17.sh`.
# Session 7, call 17 (nvidia-h100-x1): the clipping norm taken stage by stage inside the
# backward (seam::StagedNorm). Graph = eager for every sync (clipping active), then at xl
# bf16: bench single with and without clipping and `train run` single under each norm
# place (STEP_NORM=after, the pass after the backward as before; in-backward, the new
# default; side-stream), bucketed:25 and zero1 with the default; small bf16 with the
# default. All in this call; no PyTorch (its ratios come from the report call). The
# records go to $OUT/results.jsonl; the table prints every record so far after each part.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
bash run.sh model-check 2>&1 | grep -E "CUDA graph|FAIL|rror" | sed 's/TrainStep, 1 eager.*vs 10 eager steps of the same TrainStep, //'
for n in after side-stream; do
  echo "=== STEP_NORM=$n"
  STEP_NORM=$n CASES="xl:bf16" TS_STRATEGIES="single" TS_TORCH=" " bash run.sh train-speed 2>&1 | grep -E "^(size|xl|small) "
done
echo "=== default (in-backward)"
CASES="xl:bf16 small:bf16" TS_STRATEGIES="single bucketed:25 zero1" TS_TORCH=" " bash run.sh train-speed 2>&1 | grep -E "^(size|xl|small) "

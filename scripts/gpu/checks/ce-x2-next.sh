#!/usr/bin/env bash
# Run in session 30's call 160 (nvidia-h200-x2, from probe-x2-call160.sh; gpus-s30.md). TWO
# GPUs, from the packed folder (copy this and train-runs.sh into .gpu/; .gpu/nccl holds
# scripts/gpu/build-nccl.sh's NCCL 2.28.9, which $N loads). About 2 minutes.
# Session 25's world-2 recipe (calls 130-134: copy-engine gathers, 4 beside AdamW, at least
# 32 NCCL CTAs for the reduce-scatters: 0.956x one GPU, against the bar's 0.95x) predates
# zero1's default gather split (ceil(buckets / world) beside AdamW, since call 145) and was
# never run with it. At this code NCCL 2.28.9 alone gives 0.986x (calls 156-159).
CALL=ce-x2; source "$(dirname "$0")/train-runs.sh"; export TMO=45
xl single 1 single
xl zero1-w2-n9 2 zero1 $N
xl zero1-w2-n9-ce-c32 2 zero1 $N NCCL_CTA_POLICY=2 NCCL_MIN_CTAS=32
xl zero1-w2-n9-ce-c32-k4 2 zero1 $N NCCL_CTA_POLICY=2 NCCL_MIN_CTAS=32 ZERO1_PARAM_GATHER=adamw:4
xl zero1-w2-n9-c32 2 zero1 $N NCCL_MIN_CTAS=32
xl zero1-w2-n9-ce-c32-k6 2 zero1 $N NCCL_CTA_POLICY=2 NCCL_MIN_CTAS=32 ZERO1_PARAM_GATHER=adamw:6
xl zero1-w2-n3 2 zero1
pack

#!/usr/bin/env bash
# Call 135 (session 25, issue 47), two GPUs, from the packed folder (copy this and
# train-runs.sh into .gpu/). Call 131: zero1's gathers on the copy engines, 4 of 10 buckets
# beside AdamW, made its world-2 step 0.964x one GPU's. With the gathers off the SMs, NCCL's
# SMs are the reduce-scatters' only: each takes about 1 ms of every 2.3 ms of the backward
# (call 127). Fewer CTAs (NCCL_MAX_CTAS) make each one longer but may still fit, with fewer
# SMs taken from the GEMMs beside them. (Call 128's fewer CTAs slowed the SM gathers, which
# the forward waits for.)
CALL=call135
source "$(dirname "$0")/train-runs.sh"
export TMO=60
CE="$N NCCL_CTA_POLICY=2 NCCL_MIN_CTAS=32"
xl single 1 single
# Calls 133-134: 32 CTAs and 4 of 10 buckets (400 MB) beside AdamW, 0.956x one GPU. Here
# buckets of 200 MB (20), 8 or 9 beside AdamW: a finer split, and half the last
# reduce-scatter, which nothing hides (0.5-0.7 ms in call 127's timeline).
for k in 8 9; do xl ce200-$k 2 zero1:200 $CE ZERO1_PARAM_GATHER=adamw:$k; done
pack

#!/usr/bin/env bash
# Call 133 (session 25, issue 47), two GPUs, from the packed folder (copy this and
# train-runs.sh into .gpu/). Call 131: zero1's gathers on the copy engines, 4 of 10 buckets
# beside AdamW, made its world-2 step 0.964x one GPU's. With the gathers off the SMs, NCCL's
# SMs are the reduce-scatters' only: each takes about 1 ms of every 2.3 ms of the backward
# (call 127). Fewer CTAs (NCCL_MAX_CTAS) make each one longer but may still fit, with fewer
# SMs taken from the GEMMs beside them. (Call 128's fewer CTAs slowed the SM gathers, which
# the forward waits for.)
CALL=call133
source "$(dirname "$0")/train-runs.sh"
export TMO=60
CE="$N NCCL_CTA_POLICY=2 ZERO1_PARAM_GATHER=adamw:4"
xl single 1 single
xl ce-min32 2 zero1 $CE NCCL_MIN_CTAS=32
xl ce 2 zero1 $CE
xl ce-max16 2 zero1 $CE NCCL_MAX_CTAS=16
xl ce-max12 2 zero1 $CE NCCL_MAX_CTAS=12
xl ce-max8 2 zero1 $CE NCCL_MAX_CTAS=8
pack

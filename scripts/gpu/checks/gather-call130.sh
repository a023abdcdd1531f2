#!/usr/bin/env bash
# Call 130 (session 25, issue 47), two GPUs, from the packed folder (copy this and
# train-runs.sh into .gpu/). Call 129's best zero1 at world 2 was NCCL 2.28.9 (gathers in
# windows) with 32 CTAs: 41.59 ms, 1.008x one GPU. The GEMMs lose 5.5-6 ms beside NCCL's
# SMs. NCCL 2.28's copy engines (NCCL_CTA_POLICY=2, windows only) gather with no SM, but
# beside the forward they gated it (session 23: +3.5 ms). Here the copy-engine gathers start
# beside AdamW (ZERO1_PARAM_GATHER=adamw, or adamw:K for the first K buckets), where nothing
# waits for them until the next forward.
CALL=call130
source "$(dirname "$0")/train-runs.sh"
export TMO=60
xl single 1 single
xl zero1 2 zero1 $N NCCL_MIN_CTAS=32
xl zero1-ce 2 zero1 $N NCCL_MIN_CTAS=32 NCCL_CTA_POLICY=2
xl zero1-ce-adamw 2 zero1 $N NCCL_MIN_CTAS=32 NCCL_CTA_POLICY=2 ZERO1_PARAM_GATHER=adamw
xl zero1-ce-adamw5 2 zero1 $N NCCL_MIN_CTAS=32 NCCL_CTA_POLICY=2 ZERO1_PARAM_GATHER=adamw:5
xl zero1-adamw 2 zero1 $N NCCL_MIN_CTAS=32 ZERO1_PARAM_GATHER=adamw
xl zero1-adamw5 2 zero1 $N NCCL_MIN_CTAS=32 ZERO1_PARAM_GATHER=adamw:5
same zero1 zero1-ce-adamw
pack

#!/usr/bin/env bash
# Call 131 (session 25, issue 47), two GPUs, from the packed folder (copy this and
# train-runs.sh into .gpu/). Call 129's best zero1 at world 2 was NCCL 2.28.9 (gathers in
# windows) with 32 CTAs: 41.59 ms, 1.008x one GPU. The GEMMs lose 5.5-6 ms beside NCCL's
# SMs. NCCL 2.28's copy engines (NCCL_CTA_POLICY=2, windows only) gather with no SM, but
# beside the forward they gated it (session 23: +3.5 ms). Here the copy-engine gathers start
# beside AdamW (ZERO1_PARAM_GATHER=adamw, or adamw:K for the first K buckets), where nothing
# waits for them until the next forward. Call 130: copy-engine gathers, the first 5 of 10 buckets
# beside AdamW, made zero1 40.73 ms against one GPU 41.56 (0.980x); all beside AdamW 46.20,
# none 43.31. Here: how many beside AdamW (K = 3, 4, 6, 7).
CALL=call131
source "$(dirname "$0")/train-runs.sh"
export TMO=60
xl single 1 single
xl zero1 2 zero1 $N NCCL_MIN_CTAS=32
for k in 3 4 6 7; do xl zero1-ce-adamw$k 2 zero1 $N NCCL_MIN_CTAS=32 NCCL_CTA_POLICY=2 ZERO1_PARAM_GATHER=adamw:$k; done
xl zero1-ce-adamw5 2 zero1 $N NCCL_MIN_CTAS=32 NCCL_CTA_POLICY=2 ZERO1_PARAM_GATHER=adamw:5
pack

#!/usr/bin/env bash
# Call 132 (session 25, issue 47), FOUR GPUs, from the packed folder (copy this and
# train-runs.sh into .gpu/). Calls 130-131 (nvidia-h200-x2): zero1's gathers on the copy
# engines (NCCL 2.28.9 windows, NCCL_CTA_POLICY=2), the first 4 of 10 buckets beside AdamW
# and the rest beside the next forward, made zero1 at world 2 40.05 ms against one GPU's
# 41.54 (0.964x; SM gathers 41.79). At world 4 AdamW is a quarter (about 3.8 ms) and each
# rank receives 3/4 of the gathered bytes, so fewer buckets should fit beside AdamW. Here:
# world 4 with K = 0 (all beside the forward), 1, 2, 3, 4, against the SM gathers and one GPU.
CALL=call132
source "$(dirname "$0")/train-runs.sh"
export TMO=80
xl single 1 single
xl zero1-w4 4 zero1 $N NCCL_MIN_CTAS=32
for k in 1 2 3 0 4; do xl zero1-w4-ce$k 4 zero1 $N NCCL_MIN_CTAS=32 NCCL_CTA_POLICY=2 ZERO1_PARAM_GATHER=adamw:$k; done
xl zero1-w4-machine 4 zero1
xl bucketed-w4 4 bucketed:25
pack

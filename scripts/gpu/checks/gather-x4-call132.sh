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
gunzip -kf nccl/libnccl.so.2.gz
N="LD_LIBRARY_PATH=$PWD/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TMO=80
run() { local n=$1 w=$2 st=$3; shift 3; ENVS="$*" train $n /tmp/r-$n xl $w $st $((8 * w)) 20 --fresh; }
run single 1 single
run zero1-w4 4 zero1 $N NCCL_MIN_CTAS=32
for k in 1 2 3 0 4; do run zero1-w4-ce$k 4 zero1 $N NCCL_MIN_CTAS=32 NCCL_CTA_POLICY=2 ZERO1_PARAM_GATHER=adamw:$k; done
run zero1-w4-machine 4 zero1
run bucketed-w4 4 bucketed:25
pack

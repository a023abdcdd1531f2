#!/usr/bin/env bash
# Not run as such. Session 30's call 162 (nvidia-h200-x4) measured its first question: zero1 at
# world 4 took 38.78 ms on 2.28.9 against 39.30 on 2.28.3 (gpus-s30.md). FOUR GPUs, from the packed
# folder (copy this and train-runs.sh into .gpu/; .gpu/nccl holds scripts/gpu/build-nccl.sh's
# NCCL 2.28.9, which $N loads). About 3 minutes. World 2 gained 0.85 ms (zero1) and 2.9 ms
# (fsdp) from 2.28.9 at this code (calls 156-159); world 4 was last measured before zero1's
# gathers moved beside AdamW (call 110: -0.27 ms; call 132: 2.28.9 with 32 CTAs +1.15 ms,
# the two not separated). Run this before a report that loads the packed NCCL by default.
CALL=nccl-x4; source "$(dirname "$0")/train-runs.sh"; export TMO=60
xl single 1 single
xl zero1-w4-n9 4 zero1 $N
xl zero1-w4-n3 4 zero1
xl zero1-w4-n9-c32 4 zero1 $N NCCL_MIN_CTAS=32
xl fsdp-w4-n9 4 fsdp $N
xl fsdp-w4-n3 4 fsdp
xl zero1-w4-n9-b 4 zero1 $N
xl zero1-w4-n3-b 4 zero1
pack

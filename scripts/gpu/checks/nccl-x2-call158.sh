#!/usr/bin/env bash
# Call 158 (session 29), TWO GPUs, on call 156's machine held warm. zero1 at world 2 with
# NCCL 2.28.9 (zero1's gathers in windows: symmetric all-gathers) against the machine's
# 2.28.3, with the symmetric kernels' CTAs (NCCL_SYM_CTAS) and the gathers' place
# (ZERO1_PARAM_GATHER) varied. From the packed folder (copy this and train-runs.sh into
# .gpu/; .gpu/nccl holds scripts/gpu/build-nccl.sh's NCCL 2.28.9, which $N loads).
CALL=call158; source "$(dirname "$0")/train-runs.sh"; export TMO=60
xl single 1 single
xl zero1-w2-n9 2 zero1 $N
xl zero1-w2-n9-c4 2 zero1 $N NCCL_SYM_CTAS=4
xl zero1-w2-n9-c16 2 zero1 $N NCCL_SYM_CTAS=16
xl zero1-w2-n9-adamw 2 zero1 $N ZERO1_PARAM_GATHER=adamw
xl zero1-w2-n9-fwd 2 zero1 $N ZERO1_PARAM_GATHER=forward
xl zero1-w2-n3 2 zero1
xl zero1-w2-n9-b 2 zero1 $N
xl single-b 1 single
pack

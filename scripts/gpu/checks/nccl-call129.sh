#!/usr/bin/env bash
# Call 129 (session 25, issue 47), two GPUs, from the packed folder (copy this and
# train-runs.sh into .gpu/). Call 128: fewer NCCL CTAs (16, 8) made zero1 at world 2
# slower (43.64, 49.40 against 42.37 ms); cuBLASLt's nvjet kernels report no cluster shape,
# so filtering by it changed nothing. NCCL runs its large collectives on 24 channels. Here:
# more CTAs (the collectives end sooner, so fewer GEMMs run beside them), NCCL 2.28.9 with
# its windows (symmetric kernels for zero1's gathers), and other bucket sizes.
CALL=call129
source "$(dirname "$0")/train-runs.sh"
export TMO=60
xl single 1 single
xl zero1 2 zero1
xl zero1-min32 2 zero1 NCCL_MIN_CTAS=32
xl zero1-32 2 zero1 NCCL_MIN_CTAS=32 NCCL_MAX_CTAS=32
xl zero1-2289 2 zero1 $N
grep -h "window" "$R/zero1-2289.txt" | head -2
xl zero1-2289-min32 2 zero1 $N NCCL_MIN_CTAS=32
xl zero1-200 2 zero1:200
xl zero1-800 2 zero1:800
xl bucketed 2 bucketed:25
xl bucketed-min32 2 bucketed:25 NCCL_MIN_CTAS=32
xl bucketed-400 2 bucketed:400
pack

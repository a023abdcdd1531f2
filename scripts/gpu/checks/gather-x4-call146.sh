#!/usr/bin/env bash
# Call 146 (session 27), FOUR GPUs, from the packed folder (copy this and train-runs.sh into
# .gpu/); about 3 minutes. The new default gather place (⌈buckets ÷ world⌉ beside AdamW,
# call 145 at 8 rows) at 32 x 128 tokens a GPU, where issue 47's bar for zero1 at world 4
# is 0.93x one GPU: against the old place (forward) and K = 5.
CALL=call146
source "$(dirname "$0")/train-runs.sh"
export TMO=100
b32() { local n=$1 w=$2 st=$3; shift 3; ENVS="$*" train $n /tmp/r-$n xl $w $st $((32 * w)) 20 --fresh; }
b32 single-b32 1 single
b32 zero1-b32-w4 4 zero1
b32 zero1-b32-w4-forward 4 zero1 ZERO1_PARAM_GATHER=forward
b32 zero1-b32-w4-adamw5 4 zero1 ZERO1_PARAM_GATHER=adamw:5
pack

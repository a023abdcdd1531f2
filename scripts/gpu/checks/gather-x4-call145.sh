#!/usr/bin/env bash
# Call 145 (session 27), FOUR GPUs, from the packed folder (copy this and train-runs.sh into
# .gpu/); about 4 minutes. zero1 and zero2 now gather the first ⌈buckets ÷ world⌉ buckets
# beside AdamW by default (zero1::gather::beside_adamw; calls 141 and 143 measured K by
# hand). The new default against the old one (ZERO1_PARAM_GATHER=forward), at xl (10
# buckets: K = 5 at world 2, 3 at world 4) and at small (1 bucket: K = 1).
CALL=call145
source "$(dirname "$0")/train-runs.sh"
export TMO=80
xl single 1 single
for w in 4 2; do
  xl zero1-w$w $w zero1
  xl zero1-w$w-forward $w zero1 ZERO1_PARAM_GATHER=forward
done
xl zero2-w4 4 zero2
xl zero2-w4-forward 4 zero2 ZERO1_PARAM_GATHER=forward
xl zero1-w4-again 4 zero1
same zero1-w4 zero1-w4-forward
sm() { local n=$1 w=$2 st=$3; shift 3; ENVS="$*" train $n /tmp/r-$n small $w $st $((8 * w)) 40 --fresh; }
sm small-single 1 single
for w in 2 4; do
  sm small-zero1-w$w $w zero1
  sm small-zero1-w$w-forward $w zero1 ZERO1_PARAM_GATHER=forward
done
pack

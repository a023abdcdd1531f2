#!/usr/bin/env bash
# Call 141 (planned in session 26, not yet run), FOUR GPUs, from the packed folder (copy
# this and train-runs.sh into .gpu/); about 4-5 minutes. trace-x4-call142.sh follows it.
# First, two settings world 4 has not had (each a `train run`, about 20 s):
# - the gathers on the SMs, K of the 10 buckets beside AdamW (a memory-bound kernel, not the
#   GEMMs; at world 2 K = 5 took 0.45 ms off, call 130); call 132 tried only the copy
#   engines there;
# - ZeRO buckets of 200 and 800 MB (400 is the default; at world 2 both were slower).
CALL=call141
source "$(dirname "$0")/train-runs.sh"
export TMO=80
xl single 1 single
xl zero1-w4 4 zero1
for k in 1 2 3; do xl zero1-w4-adamw$k 4 zero1 ZERO1_PARAM_GATHER=adamw:$k; done
xl zero1-200-w4 4 zero1:200
xl zero1-800-w4 4 zero1:800
# zero1 became train's default in session 26, measured at xl only. At small (one 400 MB
# bucket holds every gradient, so nothing overlaps the backward) the paper puts zero1 at
# 1.13x one GPU at world 2 and zero1:25 at 0.99x, bucketed:25 at 1.17x: measure them.
sm() { local n=$1 w=$2 st=$3; shift 3; ENVS="$*" train $n /tmp/r-$n small $w $st $((8 * w)) 40 --fresh; }
sm small-single 1 single
for w in 2 4; do for st in zero1 zero1:25 bucketed:25; do sm small-${st/:/-}-w$w $w $st; done; done
pack

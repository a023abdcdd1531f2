#!/usr/bin/env bash
# Call 141 (planned in session 26, not yet run), FOUR GPUs, from the packed folder (copy
# this and train-runs.sh into .gpu/). Where world 4's overhead goes, at 8 and 32 rows a GPU:
# zero1 and bucketed:25 pay about 10 ms over one GPU at 8 rows and 15-16 ms at 32, the same
# bytes (calls 137-138). Call 140's pace and per-step spread predict about 0.9 and 2.8 ms of
# it from waiting for the slowest rank; the rest should be the GEMMs beside NCCL. One trace
# of all four ranks per strategy and size (run.sh trace): per rank, each category's time
# against one GPU's, what the kernels lose beside NCCL, and the ranks' waits in their
# collectives (summarize.py's cupti-skew).
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
for b in 8 32; do
  TRACE_BATCH=$b TRACE_STRATEGIES="single zero1 bucketed:25" TRACE_WORLD=4 OUT=$R bash run.sh trace > "$R/trace-job-b$b.txt" 2>&1 || echo "trace b$b failed"
  pack
done
traces 4
pack

#!/usr/bin/env bash
# Call 142 (planned in session 26, not yet run; after runs-x4-call141.sh), FOUR GPUs, from
# the packed folder (copy this and train-runs.sh into .gpu/); about 5 minutes.
# Where world 4's overhead goes, at 8 and 32 rows a GPU: zero1 and bucketed:25 pay about
# 10 ms over one GPU at 8 rows and 15-16 ms at 32, the same bytes (calls 137-138). Call
# 140's pace and per-step spread predict about 0.9 and 2.8 ms of it from waiting for the
# slowest rank; the rest should be the GEMMs beside NCCL. One trace of all four ranks per
# strategy and size (run.sh trace): per rank, each category's time against one GPU's, what
# the kernels lose beside NCCL, and the ranks' waits in their collectives (summarize.py's
# cupti-skew).
CALL=call142
source "$(dirname "$0")/train-runs.sh"
for b in 8 32; do
  TRACE_BATCH=$b TRACE_STRATEGIES="single zero1 bucketed:25" TRACE_WORLD=4 OUT=$R bash run.sh trace > "$R/trace-job-b$b.txt" 2>&1 || echo "trace b$b failed"
  pack
done
traces 4
pack

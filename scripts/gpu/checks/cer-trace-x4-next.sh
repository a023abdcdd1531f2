#!/usr/bin/env bash
# Session 32, FOUR GPUs (ask nvidia-h100-x4), from the packed folder (copy this, cer-next.sh and
# train-runs.sh into .gpu/). About 8 minutes.
# 1. Where zero1's world-4 step goes now that its reduce-scatters run on the copy engines: one
#    replay's CUPTI timeline, single and zero1 (run.sh trace), zero1's raw records kept.
# 2. cer-next.sh: world 4 eager against replayed with the copy-engine reduce-scatters; session
#    25's recipe taken apart at worlds 2 and 4.
CALL=cer-trace; source "$(dirname "$0")/train-runs.sh"
TRACE_KEEP=1 TRACE_BATCH=8 TRACE_STRATEGIES="single zero1" TRACE_WORLD=4 OUT=$R bash run.sh trace > "$R/trace-job-b8.txt" 2>&1 || echo "trace failed"
traces 4
ls -la $R; pack
bash "$(dirname "$0")/cer-next.sh"

#!/usr/bin/env bash
# Call 147 (session 27), FOUR GPUs, from the packed folder (copy this and train-runs.sh into
# .gpu/); about 2 minutes. The trace of call 142 (zero1 at world 4, 8 x 128 tokens a GPU)
# again at zero1's new default gather place (⌈buckets ÷ world⌉ beside AdamW, call 145):
# what it took off and what is left (the GEMMs beside NCCL, communication alone, idle).
CALL=call147
source "$(dirname "$0")/train-runs.sh"
TRACE_BATCH=8 TRACE_STRATEGIES="single zero1" TRACE_WORLD=4 OUT=$R bash run.sh trace > "$R/trace-job-b8.txt" 2>&1 || echo "trace failed"
traces 4
pack

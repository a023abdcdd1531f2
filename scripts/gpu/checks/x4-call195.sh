#!/usr/bin/env bash
# Session 36, call 195: FOUR GPUs, from the packed folder (copy this and train-runs.sh into
# .gpu/). 1 minute. Its trace failed: COMM_CE_ADDS=arrival-joined was meant for call 194's
# binaries, but gpu-pack had rebuilt the committed code, which refuses the value (call 196
# traced again). PyTorch's DDP eager at worlds 2 and 4 beside the 4-GPU report.
CALL=c195; source "$(dirname "$0")/train-runs.sh"
export COMM_CE_ADDS=arrival-joined
env $N TRACE_KEEP=1 TRACE_BATCH=32 TRACE_STRATEGIES="single zero1 bucketed:25" TRACE_WORLD=4 OUT=$R \
  timeout 200 bash run.sh trace > "$R/trace-job.txt" 2>&1 || echo "trace failed"
traces 3; pack
torch xl eager 20 ddp 2
torch xl eager 20 ddp 4
echo "done $(date -u +%T)"

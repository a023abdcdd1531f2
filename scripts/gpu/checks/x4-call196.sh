#!/usr/bin/env bash
# Session 36, call 196: FOUR GPUs, from the packed folder (copy this and train-runs.sh into
# .gpu/). About 6 minutes. Committed code (HEAD db2e17f).
# 1. One replay's CUPTI timeline at 32 rows a GPU: single, zero1 and bucketed:25 at world 4
#    (zero1 at world 4 took 110.26 ms against single's 110.09 in call 194: where do the
#    ~12 ms that sharding AdamW saves go?).
# 2. PyTorch's FSDP2 (per-block compile) at world 2 beside the 4-GPU report.
CALL=c196; source "$(dirname "$0")/train-runs.sh"

env $N TRACE_KEEP=1 TRACE_BATCH=32 TRACE_STRATEGIES="single zero1 bucketed:25" TRACE_WORLD=4 OUT=$R \
  timeout 200 bash run.sh trace > "$R/trace-job.txt" 2>&1 || echo "trace failed"
traces 3; pack

torch xl compile-blocks 20 fsdp2 2
echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Session 38, call 208 (nvidia-h200-x4), about 3 minutes. Copy this, phases.py and
# train-runs.sh into .gpu/. Kernel-only timelines at 32 rows a GPU (issue 47's 0.93x and
# 1.03x bars): single, zero1 and bucketed:25 at world 4, read by phases.py.
CALL=call208; source "$(dirname "$0")/train-runs.sh"
env LD_LIBRARY_PATH="$PWD/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CUPTI_TRACE_KERNELS_ONLY=1 TRACE_KEEP=1 TRACE_BATCH=32 TRACE_WORLD=4 \
  TRACE_STRATEGIES="single zero1 bucketed:25" OUT=$R/k timeout 240 bash run.sh trace 2>&1 | grep -i "fail\|error" | grep -v "^\[rank" | head -3
for f in $R/k/trace-*.csv.gz; do python3 phases.py $f; done
cp $R/k/trace-zero1-a1.csv.gz $O/z32.csv.gz; cp $R/k/trace-single-a1.csv.gz $O/s32.csv.gz; cp $R/k/trace-bucketed-a1.csv.gz $O/d32.csv.gz
rm -f $R/k/*.csv.gz; pack; echo "done $(date -u +%T)"

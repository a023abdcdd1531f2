#!/usr/bin/env bash
# Session 38, call 209 (nvidia-h200-x4), under a minute, run inline from the packed folder:
# a kernel-only timeline of zero1 at 32 rows with its gathers on the copy engines.
export NCCL_NVLS_ENABLE=0; cd "$(dirname "$0")"; R=/tmp/call209; mkdir -p $R
env COMM_CE_GATHER=1 LD_LIBRARY_PATH="$PWD/nccl" CUPTI_TRACE_KERNELS_ONLY=1 TRACE_KEEP=1 TRACE_BATCH=32 TRACE_WORLD=4 TRACE_STRATEGIES="zero1" \
  OUT=$R/k timeout 150 bash run.sh trace 2>&1 | grep -i "fail\|error" | grep -v "^\[rank" | head -3
python3 phases.py $R/k/trace-zero1-a1.csv.gz

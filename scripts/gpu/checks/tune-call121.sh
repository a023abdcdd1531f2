#!/usr/bin/env bash
# Call 121 (session 24), one GPU, from the packed folder (copy this and train-runs.sh into
# .gpu/): call 120 timed the GEMM candidates in a graph, but the cold-L2 flush before each
# was a memset node, so every candidate paid the memset-to-kernel gap and the memset:4
# GEMMs stayed. The flush is now a kernel (l2_flush), as the step has a kernel before each
# GEMM. Same A/B as call 120: MODEL_GEMM_TUNE=stream against the default; then traces.
CALL=call121 TABLE_ONLY=none
source "$(dirname "$0")/train-runs.sh"
x() { train "$@" --fresh; }
for a in 1 4; do
  ENVS=MODEL_GEMM_TUNE=stream x stream-a$a /tmp/r-s$a xl 1 single $((8 * a)) 25 --accum $a
  x graph-a$a /tmp/r-g$a xl 1 single $((8 * a)) 25 --accum $a
done
for a in 4 1; do
  TRACE_STRATEGIES=single TRACE_ACCUM=$a TRACE_KEEP=1 OUT=$R bash run.sh trace > "$R/trace-job-a$a.txt" 2>&1 || echo "trace accum $a failed"
done
traces 5
pack

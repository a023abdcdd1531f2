#!/usr/bin/env bash
# Call 120 (session 24), one GPU, from the packed folder (copy this and train-runs.sh into
# .gpu/): call 119 found a 4-byte memset node before 1344 of xl --accum 4's GEMMs (1x2/2x1
# clusters), costing 6.2 ms of its 135 ms replay. The tuner now times each candidate in a
# CUDA graph (model::gemm::tune), where that memset costs what it costs in the step.
# Expected: --accum 4 about 5 ms shorter, --accum 1 about 1 ms; the memsets mostly gone.
# A/B in the same call: MODEL_GEMM_TUNE=stream (the old timing) against the default.
CALL=call120 TABLE_ONLY=none
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

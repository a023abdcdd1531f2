#!/usr/bin/env bash
# Call 122 (session 24), one GPU, from the packed folder (copy this and train-runs.sh into
# .gpu/): calls 120-121 timed GEMM candidates in a graph and still chose the ones with
# cuBLASLt's memset:4 before them. Here each candidate's graph and stream time and node
# count are logged (MODEL_GEMM_TUNE_LOG), and an experiment keeps only candidates whose
# graph is the flush and one kernel (MODEL_GEMM_TUNE_PLAIN): does the step get faster?
# (It did not: the experiment's code was removed after this call.)
CALL=call122 TABLE_ONLY=none
source "$(dirname "$0")/train-runs.sh"
x() { train "$@" --fresh; }
for a in 1 4; do
  ENVS=MODEL_GEMM_TUNE_LOG=1 x log-a$a /tmp/r-l$a xl 1 single $((8 * a)) 12 --accum $a
  grep -h "gemm tune" "$R/log-a$a.txt" | sort -u > "$R/tune-log-a$a.txt"; wc -l "$R/tune-log-a$a.txt"
done
for a in 1 4; do
  x graph-a$a /tmp/r-g$a xl 1 single $((8 * a)) 25 --accum $a
  ENVS=MODEL_GEMM_TUNE_PLAIN=1 x plain-a$a /tmp/r-p$a xl 1 single $((8 * a)) 25 --accum $a
done
ENVS=MODEL_GEMM_TUNE_PLAIN=1
TRACE_STRATEGIES=single TRACE_ACCUM=4 TRACE_KEEP=1 OUT=$R MODEL_GEMM_TUNE_PLAIN=1 bash run.sh trace > "$R/trace-job-a4.txt" 2>&1 || echo "trace failed"
traces 4
grep -h "candidate" "$R/tune-log-a4.txt" | head -40 | cut -c1-200
pack

#!/usr/bin/env bash
# Call 123 (session 24), one GPU, from the packed folder (copy this and train-runs.sh into
# .gpu/): call 122 showed cuBLASLt's memset candidates are the faster GEMMs (keeping only
# the others: GEMMs +10.5 ms, idle -5.2 ms, step +3 ms), so the memsets stay and their cost
# goes: seam::graph now turns each small memset node into a kernel node (graph/nodes.rs).
# Expected: xl --accum 4 about 3-4 ms shorter, --accum 1 about 0.6 ms; the same bits as
# with the memset nodes kept (SEAM_GRAPH_MEMSETS=keep), with the same GEMM table.
CALL=call123 TABLE_ONLY=none
source "$(dirname "$0")/train-runs.sh"
timeout 300 bin/bench model-check > "$R/model-check.txt" 2>&1; echo "model-check rc $?: $(grep -c OK "$R/model-check.txt") OK, $(grep -ci fail "$R/model-check.txt") fail"
for a in 4 1; do
  ENVS=SEAM_GRAPH_MEMSETS=keep train keep-a$a /tmp/r-k$a xl 1 single $((8 * a)) 25 --accum $a --fresh
  cp /tmp/r-k$a/gemm-choices.json "$R/gemm-a$a.json"
  train kern-a$a /tmp/r-n$a xl 1 single $((8 * a)) 25 --accum $a --fresh --gemm-choices "$R/gemm-a$a.json"
  ENVS=SEAM_GRAPH_MEMSETS=keep train keep2-a$a /tmp/r-k$a xl 1 single $((8 * a)) 25 --accum $a --fresh --gemm-choices "$R/gemm-a$a.json"
  same keep-a$a kern-a$a; same keep-a$a keep2-a$a
done
for a in 4 1; do
  TRACE_STRATEGIES=single TRACE_ACCUM=$a OUT=$R bash run.sh trace > "$R/trace-job-a$a.txt" 2>&1 || echo "trace accum $a failed"
done
traces 4
pack

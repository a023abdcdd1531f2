#!/usr/bin/env bash
# Call 125 (session 24), one GPU, from the packed folder (copy this and train-runs.sh into
# .gpu/): call 124's splice failed every capture (the driver refuses a non-null edge array
# of no entries: fixed). Same checks (model-check; xl --accum 4 and 1, the memsets kept
# against spliced as kernels, the same GEMM table: same bits?), then, if the step is a graph,
# issue 48's bars: train-speed, small and xl, --accum 4, beside bench single and PyTorch's
# compile-ro trainer; then a trace of xl --accum 4.
CALL=call125 TABLE_ONLY=none
source "$(dirname "$0")/train-runs.sh"
timeout 200 bin/bench model-check > "$R/model-check.txt" 2>&1; echo "model-check rc $?: $(grep -c ': OK' "$R/model-check.txt") OK"
grep -iE "error|fail" "$R/model-check.txt" | head -3
for a in 4 1; do
  ENVS=SEAM_GRAPH_MEMSETS=keep train keep-a$a /tmp/r-k$a xl 1 single $((8 * a)) 25 --accum $a --fresh
  cp /tmp/r-k$a/gemm-choices.json "$R/gemm-a$a.json"
  train kern-a$a /tmp/r-n$a xl 1 single $((8 * a)) 25 --accum $a --fresh --gemm-choices "$R/gemm-a$a.json"
  for n in keep kern; do grep -h "train: step:" "$R/$n-a$a.txt" | head -1 | cut -c1-200; done
  same keep-a$a kern-a$a
done
if grep -q "step: one CUDA graph" "$R/kern-a4.txt"; then
  OUT="$R" CASES="small:bf16 xl:bf16" TS_WORLDS=1 TS_STRATEGIES=single TS_ACCUM=4 TS_TORCH=compile-ro TS_STEPS=30 \
    bash ./run.sh train-speed > "$R/train-speed.txt" 2>&1
  grep -E "^size|^small|^xl|accum bar" "$R/train-speed.txt" | tail -20
  rm -rf "$R/train-speed/data"; pack
  TRACE_STRATEGIES=single TRACE_ACCUM=4 OUT=$R bash run.sh trace > "$R/trace-job-a4.txt" 2>&1 || echo "trace failed"
  grep -A1 "^trace" "$R/trace.txt" | tail -2
fi
echo "=== end ($(date -u +%T))"
pack

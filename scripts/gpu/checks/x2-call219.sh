#!/usr/bin/env bash
# Session 39, call 219 (nvidia-h200-x2), about 3 minutes. Copy this, phases.py and
# train-runs.sh into .gpu/. Call 218's timeline of P + A (compute above the adds, the adds in
# short blocks) had nothing beside it: the committed step's timeline at world 2, then P + A
# again, both in this call, bucketed:25 and zero1 at 8 rows.
CALL=call219; source "$(dirname "$0")/train-runs.sh"
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
P="SEAM_GRAPH_COMPUTE_PRIORITY=2 COMM_CE_ADDS_PRIORITY=1"; A="COMM_CE_ADDS_BLOCKS=all"
trace() { # OUTDIR BATCH STRATEGIES [ENV...]
  local o=$1 b=$2 s=$3; shift 3
  env "$@" LD_LIBRARY_PATH="$PWD/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CUPTI_TRACE_KERNELS_ONLY=1 TRACE_KEEP=1 TRACE_BATCH=$b TRACE_WORLD=2 \
    TRACE_STRATEGIES="$s" OUT=$o timeout 100 bash run.sh trace 2>&1 | grep -v "^\[rank" | grep -i "fail\|error" | cut -c1-160 | head -4
  for f in $o/trace-*.csv.gz; do python3 phases.py $f; done; pack
}
echo "== as committed"; trace $R/k 8 "bucketed:25 zero1" NONE=1
echo "== P + A"; trace $R/kpa 8 "bucketed:25 zero1" $P $A
rm -f $R/k*/trace-*.csv.gz; pack; echo "done $(date -u +%T), $(el) s"

#!/usr/bin/env bash
# Call 105 (session 21), on a 4-GPU kind, from the packed folder (copy it and train-runs.sh
# into .gpu/): a CUPTI trace of one replay (`run.sh trace`) of zero1 and of fsdp at its new
# default (unit 3 at xl), xl bf16 w4, beside call 96's of unit 1: where fsdp's remaining
# 5.6 ms over zero1 go (NCCL alone, or GEMMs slowed beside NCCL).
CALL=c105; source "$(dirname "$0")/train-runs.sh"
for st in zero1 fsdp; do
  TRACE_STRATEGIES=$st TRACE_WORLD=4 OUT=/tmp/tr bash run.sh trace > /dev/null 2>&1
  cp /tmp/tr/trace/$st.summary "$R/trace-$st.txt" 2>/dev/null; rm -rf /tmp/tr; pack
  grep -v '^{' "$R/trace-$st.txt" | head -6
done
rm -rf "$D"; echo "=== end ($(date -u +%T))"; pack

#!/usr/bin/env bash
# Session 38, call 206 (nvidia-h200-x4), about 7 minutes. Copy this, phases.py and
# train-runs.sh into .gpu/. Call 205 found that COMM_CE_GATHER=1 left ZeRO-1's gathers on
# NCCL's kernels: each bucket's launch also gathers its small f32 parameters outside any
# window, and one such call sent the whole launch to NCCL. Now the copy engines take the
# calls in the window and NCCL the rest. Measured here:
# 1. comm-selftest at world 4 with the copy-engine gathers (a new check: a launch of both).
# 2. zero1 at world 4, 8 and 32 rows, gathering by the copy engines, against NCCL's kernels;
#    more buckets beside AdamW with the copy engines; eager against replayed.
# 3. A kernel-only timeline of zero1 gathering by the copy engines (phases.py).
CALL=call206; source "$(dirname "$0")/train-runs.sh"
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
env $N COMM_CE_GATHER=1 timeout 60 bin/comm-launch --nproc-per-node 4 -- bin/comm-selftest 2>&1 | grep -v "^\[rank [123]" | tail -3
xl z4 4 zero1 $N
xl z4-ceg 4 zero1 $N COMM_CE_GATHER=1
xl z4-ceg-a4 4 zero1 $N COMM_CE_GATHER=1 ZERO1_PARAM_GATHER=adamw:4
xl z4-ceg-all 4 zero1 $N COMM_CE_GATHER=1 ZERO1_PARAM_GATHER=adamw
r32() { local n=$1 w=$2 st=$3; shift 3; ENVS="$*" train $n /tmp/r-$n xl $w $st $((32 * w)) 20 --fresh; }
r32 s32 1 single $N
r32 z32 4 zero1 $N
r32 z32-ceg 4 zero1 $N COMM_CE_GATHER=1
ENVS="$N COMM_CE_GATHER=1" train z4-ceg-e /tmp/r-z4-ceg-e xl 4 zero1 32 12 --fresh --eager
ENVS="$N COMM_CE_GATHER=1" train z4-ceg-r /tmp/r-z4-ceg-r xl 4 zero1 32 12 --fresh
same z4-ceg-e z4-ceg-r
echo "runs done: $(el) s"
[ $(el) -lt 330 ] && { env COMM_CE_GATHER=1 LD_LIBRARY_PATH="$PWD/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CUPTI_TRACE_KERNELS_ONLY=1 TRACE_KEEP=1 TRACE_BATCH=8 TRACE_WORLD=4 \
    TRACE_STRATEGIES="zero1" OUT=$R/kc timeout 120 bash run.sh trace 2>&1 | grep -i "fail\|error" | grep -v "^\[rank" | head -3
  python3 phases.py $R/kc/trace-zero1-a1.csv.gz; cp $R/kc/trace-zero1-a1.csv.gz $O/zc8.csv.gz; rm -f $R/kc/*.csv.gz; }
pack; echo "done $(date -u +%T), $(el) s"

#!/usr/bin/env bash
# Session 37, call 204: FOUR GPUs, from the packed folder (copy this, replays.py and
# train-runs.sh into .gpu/). About 1 minute. Whether CUPTI's memcpy records slow the copy
# engines: split DDP at world 4, 8 rows, traced with kernel records only
# (CUPTI_TRACE_KERNELS_ONLY=1), against call 202's trace with them (48.6 ms a replay) and
# its untraced runs (45.9, call 201).
CALL=c204; source "$(dirname "$0")/train-runs.sh"
env LD_LIBRARY_PATH="$PWD/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" DDP_TAIL_STAGES=0 CUPTI_TRACE_KERNELS_ONLY=1 TRACE_KEEP=1 TRACE_BATCH=8 TRACE_WORLD=4 \
  TRACE_STRATEGIES=bucketed:25 OUT=$R/k timeout 100 bash run.sh trace 2>&1 | grep -v "^\[rank" | grep -i "period\|w4\|fail\|error" | cut -c1-120 | head -6
python3 replays.py $R/k/trace-bucketed-a1.csv.gz | grep "^[01] " | sed -n '2,5p;20,23p'
pack; echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Session 34, call 182: TWO GPUs (nvidia-h200-x2), from the packed folder (copy this and
# train-runs.sh into .gpu/). About 8 minutes. Where DDP's split step loses its time at
# world 2 (8 rows: 1.132x in call 180) and why 32 rows lose 13 ms at world 4 (1.119x, the
# split changed nothing): `train run` single and bucketed:25 at 8 and 32 rows, with and
# without the split; accumulation with the split on the GPU, eager against replayed; one
# replay's timeline each of single and bucketed:25 at 32 rows and bucketed:25 at 8 rows.
CALL=x2c182; source "$(dirname "$0")/train-runs.sh"; export TMO=90
xl single 1 single
xl b2s 2 bucketed:25 $N
ENVS="" train single32 /tmp/r-s32 xl 1 single 32 20 --fresh
ENVS="$N" train b2s32 /tmp/r-b2s32 xl 2 bucketed:25 64 20 --fresh
ENVS="$N DDP_SPLIT=0" train b2w32 /tmp/r-b2w32 xl 2 bucketed:25 64 20 --fresh
ENVS="$N" train b2a2 /tmp/r-b2a2 xl 2 bucketed:25 32 12 --fresh --accum 2
ENVS="$N" train b2a2-e /tmp/r-b2a2-e xl 2 bucketed:25 32 12 --fresh --accum 2 --eager
same b2a2 b2a2-e
pack
env TRACE_KEEP=1 TRACE_BATCH=32 TRACE_STRATEGIES="single bucketed:25" TRACE_WORLD=2 OUT=$R/t32 bash run.sh trace > "$R/trace32-job.txt" 2>&1 || echo "trace32 failed"
env TRACE_KEEP=1 TRACE_BATCH=8 TRACE_STRATEGIES="bucketed:25" TRACE_WORLD=2 OUT=$R bash run.sh trace > "$R/trace-job.txt" 2>&1 || echo "trace failed"
cat $R/t32/trace.jsonl >> $R/trace.jsonl
traces 3
pack
echo "done $(date -u +%T)"

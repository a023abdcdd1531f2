#!/usr/bin/env bash
# Session 32, FOUR GPUs (ask nvidia-h100-x4), from the packed folder (copy this and
# train-runs.sh into .gpu/). About 8 minutes. zero1's end of backward (call 171's trace: 2.4 ms
# idle waiting for the last bucket's parts, then 1.5 ms of adds, before AdamW):
# - the adds as the parts arrive, on a stream of their own (COMM_CE_ADDS=arrival, the new
#   default) against at the wait (COMM_CE_ADDS=wait, as before), bit for bit;
# - tapered last buckets (ZERO1_TAIL_MB), with the gathers beside AdamW counted in elements;
# - copy-engine gathers at world 4 (COMM_CE_GATHER=1), at 8 and 32 rows a GPU;
# - at world 2, session 25's recipe (NCCL's copy-engine gathers, 4 beside AdamW) on top.
CALL=tail; source "$(dirname "$0")/train-runs.sh"; export TMO=60
xl single 1 single
xl z4-wait 4 zero1 $N COMM_CE_ADDS=wait
xl z4 4 zero1 $N
same z4 z4-wait
xl z4-t50 4 zero1 $N ZERO1_TAIL_MB=50
xl z4-t25 4 zero1 $N ZERO1_TAIL_MB=25
xl z4-t100 4 zero1 $N ZERO1_TAIL_MB=100
xl z4-t50-ceg 4 zero1 $N ZERO1_TAIL_MB=50 COMM_CE_GATHER=1
xl z2-wait 2 zero1 $N COMM_CE_ADDS=wait
xl z2 2 zero1 $N
same z2 z2-wait
xl z2-t50 2 zero1 $N ZERO1_TAIL_MB=50
xl z2-t50-s25 2 zero1 $N ZERO1_TAIL_MB=50 COMM_CE_GATHER=0 NCCL_CTA_POLICY=2 ZERO1_PARAM_GATHER=adamw:4
xl z2-s25 2 zero1 $N COMM_CE_GATHER=0 NCCL_CTA_POLICY=2 ZERO1_PARAM_GATHER=adamw:4
xl single-b 1 single
bash -c "$N ZERO1_TAIL_MB=50 TRACE_KEEP=1 TRACE_BATCH=8 TRACE_STRATEGIES=zero1 TRACE_WORLD=4 OUT=$R bash run.sh trace" > "$R/trace-job.txt" 2>&1 || echo "trace failed"
traces 3; pack
TMO=100
ENVS="" train s32 /tmp/r-s32 xl 1 single 32 20 --fresh
ENVS="$N" train z4-32 /tmp/r-z4-32 xl 4 zero1 128 20 --fresh
ENVS="$N ZERO1_TAIL_MB=50" train z4-32-t50 /tmp/r-z4-32-t50 xl 4 zero1 128 20 --fresh
ENVS="$N ZERO1_TAIL_MB=50 COMM_CE_GATHER=1" train z4-32-t50-ceg /tmp/r-z4-32-t50-ceg xl 4 zero1 128 20 --fresh
pack
echo "done $(date -u +%T)"

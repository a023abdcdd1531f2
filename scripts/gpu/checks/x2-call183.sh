#!/usr/bin/env bash
# Session 34, call 183: TWO GPUs (nvidia-h200-x2), from the packed folder (copy this and
# train-runs.sh into .gpu/). About 7 minutes. DDP's split all-reduce with each launch's
# all-gather queued during the backward as soon as its sums are in (DDP_SPLIT_EARLY=1: one
# gather buffer, comm's copy engines), so that AdamW runs alone after the backward, against
# the default (gathers beside AdamW) and one GPU, at 8 and 32 rows; eager against replayed,
# also with 2 micro-batches; one replay's timeline.
CALL=x2c183; source "$(dirname "$0")/train-runs.sh"; export TMO=90
xl single 1 single
xl b2s 2 bucketed:25 $N
xl b2e 2 bucketed:25 $N DDP_SPLIT_EARLY=1
same b2s b2e
ENVS="$N DDP_SPLIT_EARLY=1" train b2e-e /tmp/r-b2e-e xl 2 bucketed:25 16 12 --fresh --eager
same b2e b2e-e
ENVS="$N DDP_SPLIT_EARLY=1" train b2e-a2 /tmp/r-b2e-a2 xl 2 bucketed:25 32 12 --fresh --accum 2
ENVS="$N DDP_SPLIT_EARLY=1" train b2e-a2e /tmp/r-b2e-a2e xl 2 bucketed:25 32 12 --fresh --accum 2 --eager
same b2e-a2 b2e-a2e
ENVS="" train single32 /tmp/r-s32 xl 1 single 32 20 --fresh
ENVS="$N" train b2s32 /tmp/r-b2s32 xl 2 bucketed:25 64 20 --fresh
ENVS="$N DDP_SPLIT_EARLY=1" train b2e32 /tmp/r-b2e32 xl 2 bucketed:25 64 20 --fresh
xl b2e-2 2 bucketed:25 $N DDP_SPLIT_EARLY=1
xl b2s-2 2 bucketed:25 $N
xl single-2 1 single
pack
env DDP_SPLIT_EARLY=1 TRACE_KEEP=1 TRACE_BATCH=8 TRACE_STRATEGIES="bucketed:25" TRACE_WORLD=2 OUT=$R bash run.sh trace > "$R/trace-job.txt" 2>&1 || echo "trace failed"
traces 3
pack
echo "done $(date -u +%T)"

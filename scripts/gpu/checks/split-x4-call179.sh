#!/usr/bin/env bash
# Session 33, call 179: FOUR GPUs (nvidia-h200-x4), from the packed folder (copy this and
# train-runs.sh into .gpu/). About 7 minutes. DDP's split all-reduce with its gradients'
# gather buffers (each reduce-scatter sums into a window that the all-gather fills:
# copy engines at world 2; NCCL's symmetric kernels at world 4, comm's copy engines with
# COMM_CE_GATHER=1), against call 178's (DDP_SPLIT_WINDOWS=0: NCCL's ring beside AdamW),
# the whole all-reduce and one GPU; eager against replayed at world 4; a world-4 timeline.
CALL=split179; source "$(dirname "$0")/train-runs.sh"; export TMO=90
xl single 1 single
xl b2s 2 bucketed:25 $N
xl b2s-nowin 2 bucketed:25 $N DDP_SPLIT_WINDOWS=0
same b2s b2s-nowin
xl b2 2 bucketed:25 $N DDP_SPLIT=0
xl b4s 4 bucketed:25 $N DDP_SPLIT=1
xl b4s-ce 4 bucketed:25 $N DDP_SPLIT=1 COMM_CE_GATHER=1
xl b4s-nowin 4 bucketed:25 $N DDP_SPLIT=1 DDP_SPLIT_WINDOWS=0
same b4s b4s-ce
xl b4 4 bucketed:25 $N DDP_SPLIT=0
ENVS="$N DDP_SPLIT=1 COMM_CE_GATHER=1" train b4s-ce-e /tmp/r-b4s-ce-e xl 4 bucketed:25 32 12 --fresh --eager
same b4s-ce b4s-ce-e
xl b2s-2 2 bucketed:25 $N
xl single-b 1 single
pack
env $N DDP_SPLIT=1 COMM_CE_GATHER=1 TRACE_KEEP=1 TRACE_BATCH=8 TRACE_STRATEGIES="bucketed:25" TRACE_WORLD=4 OUT=$R bash run.sh trace > "$R/trace-job.txt" 2>&1 || echo "trace failed"
traces 3
pack
echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Session 33, call 177: TWO GPUs (nvidia-h200-x2), from the packed folder (copy this and
# train-runs.sh into .gpu/). About 6 minutes. DDP's split all-reduce at world 2, now one
# gather per bucket (the smallest first) and the default:
# 1. split against whole; the gathers' NCCL CTAs (NCCL_MAX_CTAS 8, 16), NCCL's CTA policy
#    (NCCL_CTA_POLICY=0), the adds at the wait (COMM_CE_ADDS=wait);
# 2. one replay's CUPTI timeline, single and bucketed:25 (split), raw records kept.
CALL=split177; source "$(dirname "$0")/train-runs.sh"; export TMO=90
xl single 1 single
xl b2s 2 bucketed:25 $N
xl b2 2 bucketed:25 $N DDP_SPLIT=0
xl b2s-c8 2 bucketed:25 $N NCCL_MAX_CTAS=8
same b2s b2s-c8
xl b2s-c16 2 bucketed:25 $N NCCL_MAX_CTAS=16
xl b2s-p0 2 bucketed:25 $N NCCL_CTA_POLICY=0
xl b2s-wait 2 bucketed:25 $N COMM_CE_ADDS=wait
xl b2s-2 2 bucketed:25 $N
xl single-b 1 single
pack
env $N TRACE_KEEP=1 TRACE_BATCH=8 TRACE_STRATEGIES="single bucketed:25" TRACE_WORLD=2 OUT=$R bash run.sh trace > "$R/trace-job.txt" 2>&1 || echo "trace failed"
traces 4
pack
echo "done $(date -u +%T)"

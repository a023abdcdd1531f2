#!/usr/bin/env bash
# Session 33, call 181: FOUR GPUs (nvidia-h200-x4), from the packed folder (copy this and
# train-runs.sh into .gpu/). About 3 minutes. The reduce-scatters of the backward's last K
# stages by NCCL's kernels instead of the copy engines (DDP_NCCL_TAIL_STAGES=K; call 179's
# timeline: the copy engines' parts arrive 0.46 ms a stage, 3.3 ms after the backward at
# world 4): DDP split and zero1 at world 4, K = 0, 4, 8, beside one GPU.
CALL=tail181; source "$(dirname "$0")/train-runs.sh"; export TMO=90
xl single 1 single
xl b4s 4 bucketed:25 $N
xl b4s-k4 4 bucketed:25 $N DDP_NCCL_TAIL_STAGES=4
xl b4s-k8 4 bucketed:25 $N DDP_NCCL_TAIL_STAGES=8
xl z4 4 zero1 $N
xl z4-k8 4 zero1 $N DDP_NCCL_TAIL_STAGES=8
same b4s b4s-k8
pack
echo "done $(date -u +%T)"

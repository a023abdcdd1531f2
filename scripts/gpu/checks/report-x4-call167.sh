#!/usr/bin/env bash
# Session 31, call 167, FOUR GPUs (nvidia-h100-x4, the machine of call 166), from the packed
# folder (copy this, report-x4-next-b.sh and train-runs.sh into .gpu/). About 8 minutes.
# 1. The H100 report's second half (report-x4-next-b.sh: 32 x 128 tokens a GPU at worlds 1
#    and 4, PyTorch DDP at world 4 and PyTorch at world 1, 8 x 128) into $OUT/c.tgz, beside
#    call 165's first half (docs/results/report-h100x4-s30).
# 2. The world-2 default (our copy-engine gathers, never run in its own build) against
#    COMM_CE_GATHER=0: zero1 and fsdp, losses compared bit for bit.
bash "$(dirname "$0")/report-x4-next-b.sh"
O="${OUT:-/tmp/out}"; tar czf "$O/c.tgz" -C "$O" c && rm -rf "$O/c"
CALL=w2default; source "$(dirname "$0")/train-runs.sh"; export TMO=60
xl zero1-w2 2 zero1 $N
xl zero1-w2-nccl 2 zero1 $N COMM_CE_GATHER=0
same zero1-w2 zero1-w2-nccl
xl fsdp-w2 2 fsdp $N
xl fsdp-w2-nccl 2 fsdp $N COMM_CE_GATHER=0
same fsdp-w2 fsdp-w2-nccl
pack
echo "done $(date -u +%T)"

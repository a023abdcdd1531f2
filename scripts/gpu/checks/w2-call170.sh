#!/usr/bin/env bash
# Session 31, call 170, TWO GPUs (asked for nvidia-h100-x2, ran on nvidia-h200-x2), from the packed folder (copy this and
# train-runs.sh into .gpu/). About 3 minutes, the session's last device time.
# The world-2 defaults (our copy-engine gathers and reduce-scatters) against NCCL's gathers
# (COMM_CE_GATHER=0), bit for bit, zero1 and fsdp, with one GPU's step beside.
CALL=w2; source "$(dirname "$0")/train-runs.sh"; export TMO=50
xl single 1 single
xl zero1-w2 2 zero1 $N
xl zero1-w2-ncclg 2 zero1 $N COMM_CE_GATHER=0
same zero1-w2 zero1-w2-ncclg
xl fsdp-w2 2 fsdp $N
xl fsdp-w2-ncclg 2 fsdp $N COMM_CE_GATHER=0
same fsdp-w2 fsdp-w2-ncclg
pack
echo "done $(date -u +%T)"

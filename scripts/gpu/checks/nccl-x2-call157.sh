#!/usr/bin/env bash
# Call 157 (session 29), TWO GPUs, on call 156's machine held warm. Symmetric reduce-scatters
# with more CTAs (NCCL_SYM_CTAS; call 156's NCCL chose 9), and the staging without them
# (NCCL_WIN_ENABLE=0: the ring's reduce-scatter out of the same windows). DDP_RS_WINDOW
# (ddp::staging) was removed after this call: its code is in 243dfb9.
# From the packed folder (copy this and train-runs.sh into .gpu/; .gpu/nccl holds
# scripts/gpu/build-nccl.sh's NCCL 2.28.9, which $N loads).
CALL=call157; source "$(dirname "$0")/train-runs.sh"; export TMO=60
xl single 1 single
xl zero1-w2-rsw-c24 2 zero1 $N DDP_RS_WINDOW=1 NCCL_SYM_CTAS=24
xl zero1-w2-rsw-c32 2 zero1 $N DDP_RS_WINDOW=1 NCCL_SYM_CTAS=32
xl zero1-w2-n9 2 zero1 $N
xl zero1-w2-rsw-c16 2 zero1 $N DDP_RS_WINDOW=1 NCCL_SYM_CTAS=16
xl zero1-w2-n9-rsring 2 zero1 $N DDP_RS_WINDOW=1 NCCL_WIN_ENABLE=0
pack

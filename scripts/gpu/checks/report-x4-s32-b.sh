#!/usr/bin/env bash
# Session 32, FOUR GPUs, on the machine of report-x4-s32-a.sh (copy this, report-x4-next-b.sh
# and train-runs.sh into .gpu/). About 5 minutes. The report's second half
# (report-x4-next-b.sh: xl bf16 at 32 x 128 tokens a GPU, single, bucketed:25 and zero1 at
# worlds 1 and 4, PyTorch DDP compile-ro at world 4; PyTorch's trainer at world 1, 8 x 128),
# then zero1 at world 2 beside one GPU with session 25's recipe (NCCL's copy-engine gathers,
# 4 of 10 buckets beside AdamW; calls 172-173 took it apart) and without, and with NCCL's symmetric kernels gathering (4 beside AdamW).
H="$(cd "$(dirname "$0")" && pwd)"
bash "$H/report-x4-next-b.sh"
O="${OUT:-/tmp/out}"; tar czf "$O/c.tgz" -C "$O" c && rm -rf "$O/c"
CALL=w2; source "$H/train-runs.sh"; export TMO=60
xl single 1 single
xl z2 2 zero1 $N
xl z2-s25 2 zero1 $N COMM_CE_GATHER=0 NCCL_CTA_POLICY=2 ZERO1_PARAM_GATHER=adamw:4
xl z2-nccl-k4 2 zero1 $N COMM_CE_GATHER=0 ZERO1_PARAM_GATHER=adamw:4
pack
echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Session 32, FOUR GPUs, on the machine of report-x4-s32-a.sh (copy this, report-x4-next-b.sh
# and train-runs.sh into .gpu/). About 6 minutes. The report's second half
# (report-x4-next-b.sh: xl bf16 at 32 x 128 tokens a GPU, single, bucketed:25 and zero1 at
# worlds 1 and 4, PyTorch DDP compile-ro at world 4; PyTorch's trainer at world 1, 8 x 128),
# then world 2's new default (zero1's gathers by NCCL's copy engines, its zero-CTA policy
# asked through ncclCommInitRankConfig; 4 of 10 buckets beside AdamW) against the old one
# (COMM_CE_GATHER=1 NCCL_CTA_POLICY=0 ZERO1_PARAM_GATHER=adamw:5: comm's copy-engine
# gathers, 5 beside AdamW), bit for bit; NCCL's symmetric kernels with 4 beside AdamW; the
# new default eager against replayed; fsdp at world 2 with and without the zero-CTA policy.
H="$(cd "$(dirname "$0")" && pwd)"
bash "$H/report-x4-next-b.sh"
O="${OUT:-/tmp/out}"; tar czf "$O/c.tgz" -C "$O" c && rm -rf "$O/c"
CALL=w2; source "$H/train-runs.sh"; export TMO=60
xl single 1 single
xl z2 2 zero1 $N
xl z2-old 2 zero1 $N COMM_CE_GATHER=1 NCCL_CTA_POLICY=0 ZERO1_PARAM_GATHER=adamw:5
same z2 z2-old
xl z2-sym-k4 2 zero1 $N NCCL_CTA_POLICY=0
ENVS="$N" train z2-eager /tmp/r-z2-eager xl 2 zero1 16 12 --fresh --eager
same z2 z2-eager
xl f2 2 fsdp $N
xl f2-old 2 fsdp $N NCCL_CTA_POLICY=0
pack
echo "done $(date -u +%T)"

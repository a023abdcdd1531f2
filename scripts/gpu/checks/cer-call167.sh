#!/usr/bin/env bash
# Session 31, call 167, TWO GPUs (asked for nvidia-h100-x2, ran on nvidia-h200-x2: no 4-GPU kind was lent then; its world-4 lines skipped), from the packed folder (copy this and
# train-runs.sh into .gpu/; .gpu/nccl holds NCCL 2.28.9, which $N loads). About 4 minutes.
# The copy-engine reduce-scatters are now the default for zero1 at worlds 2 and 4 (deferred
# launches only; fsdp's are not). Before the report runs on them:
# 1. zero1 at world 2 with them against COMM_CE_REDUCE=0: the same bits (two parts add exactly
#    in f32; call 166 showed it) and the time.
# 2. zero1 at world 2 with fewer gathers beside AdamW (K = 4, 3; default 5): call 160 gained
#    0.8 ms at K = 4 with NCCL's copy-engine gathers; ours are the world-2 default.
# 3. zero1 at worlds 2 and 4: 12 eager steps against the replayed graph, bit for bit (the flags
#    left as they were found by every step); fsdp at world 4 (not deferred: as before).
CALL=cer2; source "$(dirname "$0")/train-runs.sh"; export TMO=60
xl single 1 single
xl zero1-w2 2 zero1 $N
xl zero1-w2-nocer 2 zero1 $N COMM_CE_REDUCE=0
same zero1-w2 zero1-w2-nocer
xl zero1-w2-k4 2 zero1 $N ZERO1_PARAM_GATHER=adamw:4
xl zero1-w2-k3 2 zero1 $N ZERO1_PARAM_GATHER=adamw:3
ENVS="$N" train zero1-w2-eager /tmp/r-zero1-w2-eager xl 2 zero1 16 12 --fresh --eager
same zero1-w2 zero1-w2-eager
[ "$(nvidia-smi -L | wc -l)" -ge 4 ] && { xl zero1-w4 4 zero1 $N
ENVS="$N" train zero1-w4-eager /tmp/r-zero1-w4-eager xl 4 zero1 32 12 --fresh --eager
same zero1-w4 zero1-w4-eager
xl fsdp-w4 4 fsdp $N; }
xl zero1-w2-b 2 zero1 $N
pack
echo "done $(date -u +%T)"

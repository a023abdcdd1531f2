#!/usr/bin/env bash
# Session 36, call 197: FOUR GPUs, from the packed folder (copy this and train-runs.sh into
# .gpu/). About 5 minutes. Committed code (HEAD db2e17f).
# 1. ZeRO-1's bucket size at world 4 (`--strategy zero1:MB`; 400 MB by default, chosen at
#    world 2 on H100 in calls 71/74, before the copy engines): 100, 200, 400, 800 at 8 rows
#    a GPU, 200 and 400 at 32 rows. Call 196's timeline of zero1 at 32 rows waits 2-4 ms
#    after the backward for the last bucket's parts.
# 2. PyTorch's FSDP2 (per-block compile) at world 4 beside the 4-GPU report.
CALL=c197; source "$(dirname "$0")/train-runs.sh"
xl single1 1 single $N
for b in 400 100 200 800; do xl z4-$b 4 zero1:$b $N; done
export TMO=75
train single32 /tmp/r-s32 xl 1 single 32 16 --fresh
for b in 400 200; do ENVS="$N" train z4s32-$b /tmp/r-z4s32-$b xl 4 zero1:$b 128 16 --fresh; done
torch xl compile-blocks 20 fsdp2 4
echo "done $(date -u +%T)"

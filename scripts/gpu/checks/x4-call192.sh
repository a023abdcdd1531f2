#!/usr/bin/env bash
# Session 35, call 192: FOUR GPUs, on call 191's machine held warm (copy this and
# train-runs.sh into .gpu/). About 5 minutes. Issue 47's GPU checks at world 4 on session
# 34's code: comm-selftest (29 checks), `bench model-check` and `zero1-check`, 12 eager steps
# against 12 replayed for zero1 (its norm from the adds) and bucketed:25; then DDP at world 4
# with its gathers in the backward (DDP_SPLIT_EARLY=1: NCCL's kernels, and with
# COMM_CE_GATHER=1 the copy engines) and zero1 reading its shards for the norm (DDP_SUMSQ=0).
CALL=x4c192; source "$(dirname "$0")/train-runs.sh"; export TMO=75
env $N timeout 90 bin/comm-launch --nproc-per-node 4 -- bin/comm-selftest > "$R/selftest-w4.txt" 2>&1
echo "selftest world 4: rc $?"; grep -h "rank 0/" "$R/selftest-w4.txt" | tail -2; grep -hi "error\|fail" "$R/selftest-w4.txt" | head -3
pack
( OUT=$R timeout 200 bash run.sh model-check zero1-check > "$R/checks.txt" 2>&1; echo "model-check zero1-check: rc $?" ); tail -6 "$R/checks.txt"; pack
ENVS="$N" train z4 /tmp/r-z4 xl 4 zero1 32 12 --fresh
ENVS="$N" train z4-e /tmp/r-z4-e xl 4 zero1 32 12 --fresh --eager
same z4 z4-e
ENVS="$N" train b4 /tmp/r-b4 xl 4 bucketed:25 32 12 --fresh
ENVS="$N" train b4-e /tmp/r-b4-e xl 4 bucketed:25 32 12 --fresh --eager
same b4 b4-e
xl single 1 single
xl b4d 4 bucketed:25 $N
xl b4-early 4 bucketed:25 $N DDP_SPLIT_EARLY=1
xl b4-early-ce 4 bucketed:25 $N DDP_SPLIT_EARLY=1 COMM_CE_GATHER=1
same b4d b4-early
xl z4d 4 zero1 $N
xl z4-parts 4 zero1 $N DDP_SUMSQ=0
same z4d z4-parts
pack
echo "done $(date -u +%T)"

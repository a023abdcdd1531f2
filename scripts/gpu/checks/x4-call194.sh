#!/usr/bin/env bash
# Session 36, call 194: FOUR GPUs, from the packed folder (copy this and train-runs.sh into
# .gpu/). About 6 minutes. The copy-engine reduce-scatters with the adds' stream joining
# each launch's copies (COMM_CE_ADDS=arrival, session 36's default: the communication
# stream forks the next launch's copies at once) against the communication stream joining
# them (arrival-joined, the old order): xl at worlds 2 and 4, 8 and 32 rows a GPU; the same
# bits either way. It ran on a build of that change, which gained nothing and was reverted
# (not committed; docs/results/gpus-s36.md): COMM_CE_ADDS=arrival-joined exists only there.
CALL=c194; source "$(dirname "$0")/train-runs.sh"
xl single1 1 single $N
for w in 4 2; do
  xl ddp$w $w bucketed:25 $N
  xl ddp$w-j $w bucketed:25 $N COMM_CE_ADDS=arrival-joined
  xl zero$w $w zero1 $N
  xl zero$w-j $w zero1 $N COMM_CE_ADDS=arrival-joined
  same ddp$w ddp$w-j; same zero$w zero$w-j
done
export TMO=75
train single32 /tmp/r-s32 xl 1 single 32 16 --fresh
ENVS="$N" train z4s32 /tmp/r-z4s32 xl 4 zero1 128 16 --fresh
ENVS="$N" train b4s32 /tmp/r-b4s32 xl 4 bucketed:25 128 16 --fresh
ENVS="$N COMM_CE_ADDS=arrival-joined" train b4s32-j /tmp/r-b4s32j xl 4 bucketed:25 128 16 --fresh
echo "done $(date -u +%T)"

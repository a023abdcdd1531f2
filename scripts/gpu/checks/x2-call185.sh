#!/usr/bin/env bash
# Session 34, call 185: TWO GPUs (nvidia-h200-x2), from the packed folder (copy this and
# train-runs.sh into .gpu/). About 2 minutes. Why the step with the norm's squares summed
# by the copy-engine adds failed to capture (call 184): each stream wait of comm now says
# which it is; ZeRO-1 and split DDP at world 2, 8 steps each, also with the adds at the wait.
CALL=x2c185; source "$(dirname "$0")/train-runs.sh"; export TMO=60
ENVS="$N" train z2 /tmp/r-z2 xl 2 zero1 16 8 --fresh
ENVS="$N COMM_CE_ADDS=wait" train z2-w /tmp/r-z2-w xl 2 zero1 16 8 --fresh
ENVS="$N" train b2 /tmp/r-b2 xl 2 bucketed:25 16 8 --fresh
ENVS="$N DDP_SPLIT_EARLY=0" train b2-late /tmp/r-b2-late xl 2 bucketed:25 16 8 --fresh
for f in z2 z2-w b2 b2-late; do echo "== $f"; grep -h "step:\|error" $R/$f.txt | cut -c1-300 | head -4; done
pack
echo "done $(date -u +%T)"

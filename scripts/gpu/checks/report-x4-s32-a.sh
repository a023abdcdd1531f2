#!/usr/bin/env bash
# Session 32, FOUR GPUs (ask nvidia-h100-x4), from the packed folder (copy this, report-a.sh and
# train-runs.sh into .gpu/). About 9.5 minutes. The 4-GPU report's first half (report-a.sh:
# the all-reduce sweep at 2 and 4 ranks beside PyTorch's, `run.sh train-speed` at xl bf16,
# 8 x 128 tokens a GPU, every strategy at worlds 1, 2 and 4, `bench single` with and without
# --clip 1, PyTorch DDP compile-ro at worlds 2 and 4) with the copy-engine reduce-scatters'
# adds at arrival (call 173). Output: $OUT/c.tgz.
H="$(cd "$(dirname "$0")" && pwd)"
# First, world 2's new communicator (zero-CTA policy through ncclCommInitRankConfig) once:
# stop here if it fails.
( CALL=pre; source "$H/train-runs.sh"; TMO=60 xl z2-pre 2 zero1 $N ) || { echo "world 2 failed: not running the report"; exit 1; }
bash "$H/report-a.sh"
O="${OUT:-/tmp/out}"; tar czf "$O/c.tgz" -C "$O" c && rm -rf "$O/c"
echo "done $(date -u +%T)"

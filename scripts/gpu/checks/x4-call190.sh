#!/usr/bin/env bash
# Session 35, call 190: FOUR GPUs (nvidia-h200-x4), from the packed folder (copy this,
# report-a.sh and train-runs.sh into .gpu/). About 9 minutes. The 4-GPU report's first half
# with sessions 33-34's DDP (the split all-reduce; at world 2 its gathers in the backward) and
# ZeRO-1's norm from the adds: report-a.sh (the all-reduce sweep at 2 and 4 ranks beside
# PyTorch's, `run.sh train-speed` at xl bf16, 8 x 128 a GPU, every strategy at worlds 1, 2
# and 4, `bench single` with and without --clip 1, PyTorch DDP compile-ro at worlds 2 and 4).
H="$(cd "$(dirname "$0")" && pwd)"
bash "$H/report-a.sh"
O="${OUT:-/tmp/out}"; tar czf "$O/c.tgz" -C "$O" c && rm -rf "$O/c"
echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Call 149 (session 28), TWO GPUs, from the packed folder. No 4-GPU kind was lent when the
# session began, so this is the world-2 half of issue 47's bars at this code (zero1's gathers
# beside AdamW), asked of nvidia-h100-x2 (the bars were set on H100s, where AdamW is a larger
# share of the step than on an H200): the all-reduce sweep at 2 ranks with PyTorch's beside
# it, `run.sh train-speed` at xl bf16, 8 x 128 tokens a GPU, every strategy at worlds 1 and 2,
# `bench single` without and with --clip 1 on the same GEMM table, and PyTorch's trainer
# (compile-ro; DDP at world 2) at worlds 1 and 2. Output: $OUT/c, read by `bench report`.
# As run, this script held report-a.sh's commands for two GPUs; report-a.sh runs them now.
bash "$(dirname "$0")/report-a.sh"

#!/usr/bin/env bash
# Not yet run (session 28: the 4-GPU kinds were lent too late in the session for it), FOUR GPUs, from the packed folder: the 4-GPU report's first half
# (issue 47, item 4) at this code (zero1's gathers beside AdamW), on the kind the bars name
# (nvidia-h100-x4; sessions 26-28 were only ever served nvidia-h200-x4). As call 137: the
# all-reduce sweep at 2 and 4 ranks with PyTorch's beside it, `run.sh train-speed` at xl bf16,
# 8 x 128 tokens a GPU, every strategy at worlds 1, 2 and 4, `bench single` without and with
# --clip 1 on the same GEMM table, and PyTorch DDP compile-ro at worlds 2 and 4.
# Output: $OUT/c (results.jsonl, torch.jsonl, train-speed/), read by `bench report`.
bash "$(dirname "$0")/report-a.sh"

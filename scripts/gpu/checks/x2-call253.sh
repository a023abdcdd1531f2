#!/usr/bin/env bash
# Session 46, call 253 (a 2-GPU kind): the final binary's default at world 2
# (memplan::RELEASED_CE_WORLDS) and its switch: xl bf16, 8 x 128 tokens a GPU, 20 steps,
# world 2: zero1; zero2 (deferred by default at world 2); zero2 with DDP_RELEASE_CE=0
# (NCCL's kernels, as before session 46); whether zero2 logged zero1's losses and norms.
# Copy into .gpu/ with train-runs.sh and nccl/. Output: $OUT/call253.tgz; a table last.
CALL=call253; source "$(dirname "$0")/train-runs.sh"
xl z1 2 zero1 $N
xl zero2 2 zero2 $N
xl zero2-nccl 2 zero2 $N DDP_RELEASE_CE=0
echo "zero2 = zero1: $(same zero2 z1)"
echo "zero2, NCCL's kernels = zero1: $(same zero2-nccl z1)"
pack

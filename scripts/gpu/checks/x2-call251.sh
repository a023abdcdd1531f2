#!/usr/bin/env bash
# Session 46, call 251 (a 2-GPU kind): FSDP on comm's copy engines at a model no GPU holds
# alone for AdamW: the Llama-shaped 6.7B, bf16, world 2, 8 x 128 tokens a GPU, 16 steps,
# by 96f001f's binary (copy engines; each window reused once its launch is waited for) and
# 4afedf2's (train-old.gz: NCCL's kernels): the step, the peak and the NCCL windows, and
# whether both logged the same losses and norms. Copy into .gpu/ with train-runs.sh, nccl/
# and train-old.gz. Output: $OUT/call251.tgz; a table last.
CALL=call251; source "$(dirname "$0")/train-runs.sh"; export TMO=240
gunzip -kf train-old.gz && chmod +x train-old && cp bin/train train-new
use() { cp "train-$1" bin/train; }
big() { ENVS="$N" train "$1" "/tmp/r-$1" 6.7B 2 fsdp 16 16 --fresh; }
use new; big fsdp-new
use old; big fsdp-old
use new
echo "fsdp 6.7B new = old: $(same fsdp-new fsdp-old)"
for f in "$R"/fsdp-*.txt; do echo "$(basename "$f" .txt): $(grep -ho '[0-9.]* GiB of them in NCCL windows' "$f" | sort -u | tr '\n' ' ')"; done
pack

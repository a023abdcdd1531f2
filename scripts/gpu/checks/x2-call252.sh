#!/usr/bin/env bash
# Session 46, call 252 (a 2-GPU kind): are call 251's two 6.7B fsdp runs apart only by the
# norm's summation order? Call 251's runs agreed to 2e-7 in the loss for 3 steps, then
# parted. Here, 96f001f's binary again: (1) its norm from the shards (DDP_SUMSQ=0, as the
# binary before took it), expected to log 4afedf2's losses and norms (call 251's fsdp-old)
# bit for bit if the copy engines' sums (and the windows' reuse) give NCCL's sums; (2) as
# in call 251, expected to repeat call 251's fsdp-new bit for bit. Copy into .gpu/ with
# train-runs.sh, nccl/, and call251-gemm-6.7B.json, call251-fsdp-new.log.jsonl and
# call251-fsdp-old.log.jsonl (docs/results/gpus-s46/call251). Output: $OUT/call252.tgz; a table last.
CALL=call252; source "$(dirname "$0")/train-runs.sh"; export TMO=240
cp call251-gemm-6.7B.json "$R/gemm-6.7B.json"  # call 251's GEMM choices: its bits
cp call251-fsdp-new.log.jsonl "$R/c251-new.log.jsonl"; cp call251-fsdp-old.log.jsonl "$R/c251-old.log.jsonl"
ENVS="$N DDP_SUMSQ=0" train fsdp-parts /tmp/r-parts 6.7B 2 fsdp 16 16 --fresh
ENVS="$N" train fsdp-again /tmp/r-again 6.7B 2 fsdp 16 16 --fresh
echo "norm from the shards = 4afedf2 (call 251): $(same fsdp-parts c251-old)"
echo "again = call 251's new: $(same fsdp-again c251-new)"
pack

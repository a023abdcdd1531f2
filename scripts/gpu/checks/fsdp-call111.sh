#!/usr/bin/env bash
# Call 111 (session 22), on a 4-GPU kind, from the packed folder (copy it, train-runs.sh and
# nccl/libnccl.so.2.gz from scripts/gpu/build-nccl.sh into .gpu/): issue 50's 6.7B bar
# with NCCL 2.28.9, where gather buffers are NCCL windows by default, beside PyTorch
# FSDP2 (the machine's own NCCL) in the same call; 6.7B and 13B with and without windows.
CALL=c111; source "$(dirname "$0")/train-runs.sh"
gunzip -kf nccl/libnccl.so.2.gz
N="LD_LIBRARY_PATH=$PWD/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
A="--fresh --ckpt-every 100000"
ENVS="$N" TMO=200 train fsdp-n9-6.7B /tmp/b0 6.7B 4 fsdp 32 14 $A
grep -h "gather buffers" "$R/fsdp-n9-6.7B.txt" | head -1 | cut -c1-200
ENVS="" TMO=200 train fsdp-6.7B /tmp/b0 6.7B 4 fsdp 32 14 $A
same fsdp-6.7B fsdp-n9-6.7B
rm -rf /tmp/b0
torch 6.7B compile-blocks 20
torch 6.7B eager 20
ENVS="$N" TMO=200 train fsdp-n9-13B /tmp/b1 13B 4 fsdp 32 10 $A
ENVS="" TMO=200 train fsdp-13B /tmp/b1 13B 4 fsdp 32 10 $A
same fsdp-13B fsdp-n9-13B
rm -rf /tmp/b1 "$D"; echo "=== end ($(date -u +%T))"; pack

#!/usr/bin/env bash
# Call 112 (session 22), on a 4-GPU kind, from the packed folder (copy it, train-runs.sh,
# call 96's GEMM table gemm-xl.json and nccl/libnccl.so.2.gz from scripts/gpu/build-nccl.sh
# into .gpu/): fsdp no longer makes whole bf16 copies before sharding them (they are views
# into the unit buffers from the start), and train's peak counts NCCL windows only from
# when they exist. 13B, 6.7B and xl with NCCL 2.28.9 (windows) and the machine's 2.28.3.
CALL=c112; source "$(dirname "$0")/train-runs.sh"
cp gemm-xl.json "$R/gemm-xl.json"
gunzip -kf nccl/libnccl.so.2.gz
N="LD_LIBRARY_PATH=$PWD/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
A="--fresh --ckpt-every 100000"
ENVS="$N" TMO=200 train fsdp-n9-13B /tmp/b1 13B 4 fsdp 32 10 $A
ENVS="" TMO=200 train fsdp-13B /tmp/b1 13B 4 fsdp 32 10 $A
same fsdp-13B fsdp-n9-13B
rm -rf /tmp/b1
ENVS="$N" TMO=200 train fsdp-n9-6.7B /tmp/b0 6.7B 4 fsdp 32 14 $A
rm -rf /tmp/b0
ENVS="$N" train zero1-n9-xl /tmp/a0 xl 4 zero1 32 20 $A
ENVS="$N" train fsdp-n9-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="" train fsdp-xl /tmp/a1 xl 4 fsdp 32 20 $A
same fsdp-xl fsdp-n9-xl
same zero1-n9-xl fsdp-n9-xl
rm -rf /tmp/a? "$D"; echo "=== end ($(date -u +%T))"; pack

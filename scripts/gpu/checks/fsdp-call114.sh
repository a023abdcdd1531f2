#!/usr/bin/env bash
# Call 114 (session 23), on a 4-GPU kind, from the packed folder (copy it, train-runs.sh and
# nccl/libnccl.so.2.gz into .gpu/): call 113's second half, 13B fsdp with NCCL 2.28.9
# (windows) and the machine's 2.28.3 (the same bits), beside PyTorch FSDP2 compile-blocks
# and eager in the same call: issue 50's 13B bar. First, why 6.7B zero1 with 2.28.9 stopped
# in call 113 before its first step (killed at 200 s): with windows under a 45 s comm
# timeout (the watchdog names what hangs), and without windows.
CALL=c114; source "$(dirname "$0")/train-runs.sh"
cp gemm-6.7B.json "$R/gemm-6.7B.json"
gunzip -kf nccl/libnccl.so.2.gz
N="LD_LIBRARY_PATH=$PWD/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
A="--fresh --ckpt-every 100000"
ENVS="$N COMM_TIMEOUT_S=45 NCCL_DEBUG=WARN" TMO=110 train zero1-n9-6.7B /tmp/b0 6.7B 4 zero1 32 14 $A
ENVS="$N COMM_NCCL_WINDOWS=0" TMO=150 train zero1-n9-nowin-6.7B /tmp/b0 6.7B 4 zero1 32 14 $A
rm -rf /tmp/b0
ENVS="$N" TMO=200 train fsdp-n9-13B /tmp/b1 13B 4 fsdp 32 10 $A
torch 13B compile-blocks 12
torch 13B eager 12
ENVS="" TMO=200 train fsdp-13B /tmp/b1 13B 4 fsdp 32 10 $A
same fsdp-13B fsdp-n9-13B
rm -rf /tmp/b1
rm -rf "$D"; echo "=== end ($(date -u +%T))"; pack

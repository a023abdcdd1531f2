#!/usr/bin/env bash
# Call 115 (session 23), on a 4-GPU kind, from the packed folder (copy it, train-runs.sh,
# gemm-xl.json, gemm-6.7B.json (call 113's) and nccl/libnccl.so.2.gz into .gpu/): zero1 and
# zero2 at 6.7B with NCCL 2.28.9's windows, after the fix of calls 113-114's hang (the
# gather buffer zeroed by cuMemsetD8Async, not by candle's 32-bit-indexed fill kernel,
# which never ended past 2^32 elements). The same bits as call 114's run without windows
# (compared offline), and the peaks for the plan.
CALL=c115; source "$(dirname "$0")/train-runs.sh"
cp gemm-xl.json "$R/gemm-xl.json"; cp gemm-6.7B.json "$R/gemm-6.7B.json"
gunzip -kf nccl/libnccl.so.2.gz
N="LD_LIBRARY_PATH=$PWD/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
A="--fresh --ckpt-every 100000"
ENVS="$N COMM_TIMEOUT_S=60" TMO=150 train zero1-n9-6.7B /tmp/b0 6.7B 4 zero1 32 14 $A
ENVS="$N COMM_TIMEOUT_S=60" TMO=150 train zero2-n9-6.7B /tmp/b0 6.7B 4 zero2 32 14 $A
rm -rf /tmp/b0
ENVS="$N" train zero1-n9-xl /tmp/a0 xl 4 zero1 32 20 $A
rm -rf /tmp/a0 "$D"; echo "=== end ($(date -u +%T))"; pack

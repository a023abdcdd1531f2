#!/usr/bin/env bash
# Call 113 (session 22), on a 4-GPU kind, from the packed folder (copy it, train-runs.sh and
# nccl/libnccl.so.2.gz into .gpu/): call 112's 13B fsdp peak rose by the unit buffers,
# made before the whole masters were released; now they are made after. 13B with NCCL
# 2.28.9 (windows), the last of the session's device time.
CALL=c113; source "$(dirname "$0")/train-runs.sh"
gunzip -kf nccl/libnccl.so.2.gz
N="LD_LIBRARY_PATH=$PWD/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
ENVS="$N" TMO=140 train fsdp-n9-13B /tmp/b1 13B 4 fsdp 32 10 --fresh --ckpt-every 100000
rm -rf /tmp/b1 "$D"; echo "=== end ($(date -u +%T))"; pack

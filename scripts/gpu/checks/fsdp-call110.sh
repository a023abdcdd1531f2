#!/usr/bin/env bash
# Call 110 (session 22), on a 4-GPU kind, from the packed folder (copy it, train-runs.sh,
# call 96's GEMM table gemm-xl.json and nccl/libnccl.so.2.gz into .gpu/): NCCL 2.28.9 built
# here for sm_90 (scripts/gpu/build-nccl.sh), whose symmetric kernels are fixed (2.28.7's
# release notes), beside the machine's 2.28.3. With 2.28.9 gather buffers are NCCL windows
# by default (comm::nccl::window). xl bf16 w4, bit for bit against 2.28.3 without windows.
CALL=c110; source "$(dirname "$0")/train-runs.sh"
cp gemm-xl.json "$R/gemm-xl.json"
gunzip -kf nccl/libnccl.so.2.gz
N="LD_LIBRARY_PATH=$PWD/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for e in "$N" "$N COMM_NCCL_WINDOWS=0" ""; do
  env $e timeout 120 bin/comm-launch --nproc-per-node 4 -- bin/comm-selftest 2>&1 | tail -2 | sed "s|^|selftest [${e#*nccl }] |"
done
env $N NCCL_DEBUG=VERSION timeout 60 bin/comm-launch --nproc-per-node 2 -- bin/comm-selftest 2>&1 | grep -m1 "NCCL version"
A="--fresh --ckpt-every 100000"
ENVS="" train zero1-xl /tmp/a0 xl 4 zero1 32 20 $A
ENVS="$N" train zero1-n9-xl /tmp/a0 xl 4 zero1 32 20 $A
same zero1-xl zero1-n9-xl
ENVS="" train fsdp-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="$N" train fsdp-n9-xl /tmp/a1 xl 4 fsdp 32 20 $A
same fsdp-xl fsdp-n9-xl
ENVS="$N COMM_NCCL_WINDOWS=0" train fsdp-n9-nowin-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="$N COMM_NCCL_WINDOWS=0" train zero1-n9-nowin-xl /tmp/a0 xl 4 zero1 32 20 $A
ENVS="$N" train zero2-n9-xl /tmp/a2 xl 4 zero2 32 20 $A
ENVS="$N" train bucketed-n9-xl /tmp/a3 xl 4 bucketed:25 32 20 $A
ENVS="$N" train zero1-n9-again-xl /tmp/a0 xl 4 zero1 32 20 $A
ENVS="$N" train fsdp-n9-again-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="" train zero1-again-xl /tmp/a0 xl 4 zero1 32 20 $A
rm -rf /tmp/a? "$D"; echo "=== end ($(date -u +%T))"; pack

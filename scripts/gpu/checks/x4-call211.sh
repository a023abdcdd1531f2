#!/usr/bin/env bash
# Session 38, call 211 (nvidia-h200-x4), run inline from the packed folder: comm-selftest at
# world 4 with the copy-engine gathers, the kept build (bin/comm-selftest-kept.gz) and one
# whose NcclComm::launch_on dropped the calls that NCCL takes beside the copy engines'
# (bin/comm-selftest-broken.gz, built by hand for the call). The broken one must fail naming
# "all_gather_coalesced in place (plain, with a buffer)".
export NCCL_NVLS_ENABLE=0; cd "$(dirname "$0")"; gunzip -kf nccl/libnccl.so.2.gz
gunzip -c bin/comm-launch.gz > /tmp/cl; chmod +x /tmp/cl
for b in kept broken; do
  gunzip -c bin/comm-selftest-$b.gz > /tmp/st-$b; chmod +x /tmp/st-$b; echo "== $b"
  env LD_LIBRARY_PATH=$PWD/nccl COMM_CE_GATHER=1 COMM_TIMEOUT_S=30 timeout 90 /tmp/cl --nproc-per-node 4 -- /tmp/st-$b 2>&1 \
    | grep -i "rank 0\|fail\|mismatch\|error" | cut -c1-300 | head -4
done

#!/usr/bin/env bash
# Call 109 (session 22), on a 4-GPU kind, from the packed folder (copy it, train-runs.sh and
# call 96's GEMM table gemm-xl.json into .gpu/): gather buffers in NCCL windows
# (COMM_NCCL_WINDOWS=1) with the default CTA policy (NCCL's symmetric kernels), now one
# NCCL call per all-gather on NCCL < 2.28.7 (call 108: grouped, 2.28.3 trained other
# numbers; 2.28.7's release notes fix that), and zero1's bf16 copies in one window too.
# xl bf16 w4: each strategy with and without, bit for bit.
CALL=c109; source "$(dirname "$0")/train-runs.sh"
# The conformance suite (its gathers into a gather buffer included), without and with.
for e in "" "COMM_NCCL_WINDOWS=1"; do
  env $e timeout 120 bin/comm-launch --nproc-per-node 4 -- bin/comm-selftest 2>&1 | tail -3 | sed "s/^/selftest [$e] /"
done
cp gemm-xl.json "$R/gemm-xl.json"
A="--fresh --ckpt-every 100000"
W="COMM_NCCL_WINDOWS=1"
ENVS="" train zero1-xl /tmp/a0 xl 4 zero1 32 20 $A
ENVS="$W" train zero1-win-xl /tmp/a0 xl 4 zero1 32 20 $A
same zero1-xl zero1-win-xl
ENVS="" train fsdp-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="$W" train fsdp-win-xl /tmp/a1 xl 4 fsdp 32 20 $A
same fsdp-xl fsdp-win-xl
ENVS="" train zero2-xl /tmp/a2 xl 4 zero2 32 20 $A
ENVS="$W" train zero2-win-xl /tmp/a2 xl 4 zero2 32 20 $A
same zero2-xl zero2-win-xl
ENVS="$W NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING" train fsdp-win-dbg /tmp/a1 xl 4 fsdp 32 8 $A
grep -h "AllGather" "$R/fsdp-win-dbg.txt" | grep "rank 0" | sed 's/.*AllGather/AllGather/; s/[0-9]* Bytes/N Bytes/' | sort | uniq -c | sort -rn | head -8
ENVS="$W" train zero1-win2-xl /tmp/a0 xl 4 zero1 32 20 $A
ENVS="$W" train fsdp-win2-xl /tmp/a1 xl 4 fsdp 32 20 $A
rm -rf /tmp/a? "$D"; echo "=== end ($(date -u +%T))"; pack

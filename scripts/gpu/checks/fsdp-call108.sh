#!/usr/bin/env bash
# Call 108 (session 22), on a 4-GPU kind, from the packed folder (copy it, train-runs.sh and
# call 96's GEMM table gemm-xl.json into .gpu/): fsdp's unit buffers as NCCL symmetric
# windows (COMM_NCCL_WINDOWS=1), so that NCCL 2.28's all-gathers into them can run on the
# copy engines (NCCL_CTA_POLICY=2) instead of SMs; xl bf16 w4 beside zero1 and fsdp as it
# was; the same bits with and without.
CALL=c108; source "$(dirname "$0")/train-runs.sh"
cp gemm-xl.json "$R/gemm-xl.json"
A="--fresh --ckpt-every 100000"
ENVS="" train zero1-xl /tmp/a0 xl 4 zero1 32 20 $A
ENVS="" train fsdp-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="COMM_NCCL_WINDOWS=1 NCCL_CTA_POLICY=2 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,REG,TUNING" \
  train fsdp-ce-xl /tmp/a1 xl 4 fsdp 32 20 $A
grep -h -i "NCCL version\|CE\b\|Init CE\|symmetric\|window\|CTA" "$R/fsdp-ce-xl.txt" | sort | uniq -c | sort -rn | head -20
same fsdp-xl fsdp-ce-xl
ENVS="COMM_NCCL_WINDOWS=1" train fsdp-win-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="COMM_NCCL_WINDOWS=1 NCCL_CTA_POLICY=2 FSDP_KEEP_LAST=24" train fsdp-ce-k24-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="COMM_NCCL_WINDOWS=1 NCCL_CTA_POLICY=2" train fsdp-ce2-xl /tmp/a1 xl 4 fsdp 32 20 $A
rm -rf /tmp/a? "$D"; echo "=== end ($(date -u +%T))"; pack

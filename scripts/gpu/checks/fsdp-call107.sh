#!/usr/bin/env bash
# Call 107 (session 21), on a 4-GPU kind, from the packed folder (copy it, train-runs.sh and
# call 96's GEMM table gemm-xl.json into .gpu/): NCCL's CTA policy (NCCL_CTA_POLICY: 1,
# efficiency, "the minimal number of CTAs ... for better compute and communication
# overlap"; 2, zero-CTA where it can) for zero1 and fsdp at xl bf16 w4, after call 105's
# trace put fsdp's remaining cost in GEMMs slowed beside NCCL.
CALL=c107; source "$(dirname "$0")/train-runs.sh"
cp gemm-xl.json "$R/gemm-xl.json"
A="--fresh --ckpt-every 100000"
ENVS="" train zero1-xl /tmp/a0 xl 4 zero1 32 20 $A
ENVS="" train fsdp-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="NCCL_CTA_POLICY=1" train fsdp-cta1-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="NCCL_CTA_POLICY=1" train zero1-cta1-xl /tmp/a0 xl 4 zero1 32 20 $A
ENVS="NCCL_CTA_POLICY=2" train fsdp-cta2-xl /tmp/a1 xl 4 fsdp 32 20 $A
rm -rf /tmp/a? "$D"; echo "=== end ($(date -u +%T))"; pack

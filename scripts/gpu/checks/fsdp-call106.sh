#!/usr/bin/env bash
# Call 106 (session 21), on a 4-GPU kind, from the packed folder (copy it, train-runs.sh and
# call 96's GEMM table gemm-xl.json into .gpu/): after call 105's trace, xl bf16 w4 fsdp at
# its default unit (3) with the casts on the compute stream (FSDP_CAST=compute) and with the
# last 12 stages kept (DeepSpeed ZeRO-3's default reuse distance, 1e9 parameters, keeps
# about that many of xl's 41M-parameter blocks), beside zero1.
CALL=c106; source "$(dirname "$0")/train-runs.sh"
cp gemm-xl.json "$R/gemm-xl.json"
A="--fresh --ckpt-every 100000"
ENVS="" train zero1-xl /tmp/a0 xl 4 zero1 32 20 $A
ENVS="" train fsdp-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="FSDP_CAST=compute" train fsdp-castc-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="FSDP_KEEP_LAST=12" train fsdp-k12-xl /tmp/a1 xl 4 fsdp 32 20 $A
rm -rf /tmp/a? "$D"; echo "=== end ($(date -u +%T))"; pack

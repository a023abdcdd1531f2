#!/usr/bin/env bash
# Call 101 (session 21), on a 4-GPU kind, from the packed folder (copy it, train-runs.sh and
# call 96's GEMM table gemm-xl.json into .gpu/): fsdp's units (FSDP_UNIT=k, k stages gathered
# as one launch into one buffer), unmeasured in session 20. A. xl bf16 w4: zero1, fsdp,
# units 2, 3, 4, unit 2 with FSDP_PREFETCH=2 and with FSDP_KEEP_LAST=24; whether unit 2
# trains bit for bit as unit 1. B. 6.7B fsdp at units 2 and 1 beside PyTorch FSDP2
# compile-blocks.
CALL=c101; source "$(dirname "$0")/train-runs.sh"
cp gemm-xl.json "$R/gemm-xl.json"
A="--fresh --ckpt-every 100000"
ENVS="" train zero1-xl /tmp/a0 xl 4 zero1 32 20 $A
ENVS="" train fsdp-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="FSDP_UNIT=2" train fsdp-u2-xl /tmp/a1 xl 4 fsdp 32 20 $A
same fsdp-xl fsdp-u2-xl
ENVS="FSDP_UNIT=3" train fsdp-u3-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="FSDP_UNIT=4" train fsdp-u4-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="FSDP_UNIT=2 FSDP_PREFETCH=2" train fsdp-u2-ahead2-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="FSDP_UNIT=2 FSDP_KEEP_LAST=24" train fsdp-u2-k24-xl /tmp/a1 xl 4 fsdp 32 20 $A
rm -rf /tmp/a?
ENVS="FSDP_UNIT=2" TMO=200 train fsdp-u2-6.7B /tmp/b0 6.7B 4 fsdp 32 14 $A
rm -rf /tmp/b0
torch 6.7B compile-blocks 20
ENVS="" TMO=200 train fsdp-6.7B /tmp/b0 6.7B 4 fsdp 32 14 $A
rm -rf /tmp/b0 "$D"; echo "=== end ($(date -u +%T))"; pack

#!/usr/bin/env bash
# Call 102 (session 21), on a 4-GPU kind, from the packed folder (copy it, train-runs.sh and
# call 96's GEMM table gemm-xl.json into .gpu/). Call 101: units 2/3/4 took fsdp at xl from
# 1.200x zero1 to 1.150/1.135/1.146x, unit 2 with FSDP_KEEP_LAST=24 to 1.093x. A. xl bf16
# w4: units with kept stages and deeper prefetch; NCCL_MAX_CTAS (fewer SMs for NCCL beside
# the GEMMs) for zero1 and fsdp. B. 13B fsdp at units 3 and 1 beside PyTorch FSDP2
# compile-blocks.
CALL=c102; source "$(dirname "$0")/train-runs.sh"
cp gemm-xl.json "$R/gemm-xl.json"
A="--fresh --ckpt-every 100000"
ENVS="" train zero1-xl /tmp/a0 xl 4 zero1 32 20 $A
ENVS="FSDP_UNIT=3" train fsdp-u3-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="FSDP_UNIT=3 FSDP_KEEP_LAST=6" train fsdp-u3-k6-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="FSDP_UNIT=3 FSDP_KEEP_LAST=24" train fsdp-u3-k24-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="FSDP_UNIT=3 FSDP_KEEP_LAST=24 FSDP_PREFETCH=2" train fsdp-u3-k24-ahead2-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="FSDP_UNIT=2 FSDP_KEEP_LAST=24 FSDP_PREFETCH=2" train fsdp-u2-k24-ahead2-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="NCCL_MAX_CTAS=8" train zero1-cta8-xl /tmp/a0 xl 4 zero1 32 20 $A
ENVS="FSDP_UNIT=3 NCCL_MAX_CTAS=8" train fsdp-u3-cta8-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="FSDP_UNIT=3 NCCL_MAX_CTAS=16" train fsdp-u3-cta16-xl /tmp/a1 xl 4 fsdp 32 20 $A
rm -rf /tmp/a?
ENVS="FSDP_UNIT=3" TMO=200 train fsdp-u3-13B /tmp/b0 13B 4 fsdp 32 10 $A
rm -rf /tmp/b0
torch 13B compile-blocks 12
ENVS="" TMO=200 train fsdp-13B /tmp/b0 13B 4 fsdp 32 10 $A
rm -rf /tmp/b0 "$D"; echo "=== end ($(date -u +%T))"; pack

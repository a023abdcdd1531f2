#!/usr/bin/env bash
# Call 103 (session 21), on a 4-GPU kind, from the packed folder (copy it, train-runs.sh and
# call 96's GEMM table gemm-xl.json into .gpu/): fsdp's default unit now as many stages as
# make 200 MB (memplan::fsdp_unit: 3 of xl's 82 MB blocks, 1 of 6.7B's). A. xl bf16 w4:
# zero1, zero2, fsdp, fsdp with FSDP_KEEP_LAST=24 (and two units ahead). B. 6.7B fsdp beside
# PyTorch FSDP2 compile-blocks and eager.
CALL=c103; source "$(dirname "$0")/train-runs.sh"
cp gemm-xl.json "$R/gemm-xl.json"
A="--fresh --ckpt-every 100000"
ENVS="" train zero1-xl /tmp/a0 xl 4 zero1 32 20 $A
ENVS="" train fsdp-xl /tmp/a1 xl 4 fsdp 32 20 $A
grep -h "stage(s) at a time" "$R/fsdp-xl.txt" | head -1 | cut -c1-160
ENVS="FSDP_KEEP_LAST=24" train fsdp-k24-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="FSDP_KEEP_LAST=24 FSDP_PREFETCH=2" train fsdp-k24-ahead2-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="" train zero2-xl /tmp/a2 xl 4 zero2 32 20 $A
rm -rf /tmp/a?
ENVS="" TMO=200 train fsdp-6.7B /tmp/b0 6.7B 4 fsdp 32 14 $A
grep -h "stage(s) at a time" "$R/fsdp-6.7B.txt" | head -1 | cut -c1-160
rm -rf /tmp/b0
torch 6.7B compile-blocks 20
torch 6.7B eager 20
rm -rf "$D"; echo "=== end ($(date -u +%T))"; pack

#!/usr/bin/env bash
# Call 104 (session 21), on a 4-GPU kind, from the packed folder (copy it, train-runs.sh and
# call 96's GEMM table gemm-xl.json into .gpu/): issue 50's 13B bars at fsdp's new default
# (unit 1 there, as memplan::fsdp_unit gives) beside PyTorch FSDP2 compile-blocks and eager
# in one call; xl zero1 and fsdp once more (call 103: 1.134x).
CALL=c104; source "$(dirname "$0")/train-runs.sh"
cp gemm-xl.json "$R/gemm-xl.json"
A="--fresh --ckpt-every 100000"
ENVS="" train zero1-xl /tmp/a0 xl 4 zero1 32 20 $A
ENVS="" train fsdp-xl /tmp/a1 xl 4 fsdp 32 20 $A
rm -rf /tmp/a?
ENVS="" TMO=200 train fsdp-13B /tmp/b0 13B 4 fsdp 32 10 $A
grep -h "stage(s) at a time" "$R/fsdp-13B.txt" | head -1 | cut -c1-160
rm -rf /tmp/b0
torch 13B compile-blocks 12
torch 13B eager 12
rm -rf "$D"; echo "=== end ($(date -u +%T))"; pack

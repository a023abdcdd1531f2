#!/usr/bin/env bash
# Call 113 (written in session 22, not run then: its device time was spent), on a 4-GPU
# kind, from the packed folder (copy it, train-runs.sh, call 96's GEMM table gemm-xl.json
# and nccl/libnccl.so.2.gz from scripts/gpu/build-nccl.sh into .gpu/): release_masters
# now releases every whole master before any bf16 copy exists, then makes the copies
# (zero1: gathered from the chunks into one gather buffer; fsdp: views into its unit
# buffers). Its first run on GPUs: the same bits as before (calls 110-112's logs), and the
# peaks, with NCCL 2.28.9 (windows) and the machine's 2.28.3. Then PyTorch FSDP2 at 6.7B
# for issue 50's bar in the same call; 13B is call 114 (fsdp-call114.sh), which one call
# could not hold beside these.
CALL=c113; source "$(dirname "$0")/train-runs.sh"
cp gemm-xl.json "$R/gemm-xl.json"
gunzip -kf nccl/libnccl.so.2.gz
N="LD_LIBRARY_PATH=$PWD/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
A="--fresh --ckpt-every 100000"
ENVS="$N" train zero1-n9-xl /tmp/a0 xl 4 zero1 32 20 $A
ENVS="" train zero1-xl /tmp/a0 xl 4 zero1 32 20 $A
same zero1-xl zero1-n9-xl
ENVS="$N" train zero2-n9-xl /tmp/a2 xl 4 zero2 32 20 $A
ENVS="$N" train fsdp-n9-xl /tmp/a1 xl 4 fsdp 32 20 $A
ENVS="" train fsdp-xl /tmp/a1 xl 4 fsdp 32 20 $A
same fsdp-xl fsdp-n9-xl
rm -rf /tmp/a?
ENVS="$N" TMO=200 train fsdp-n9-6.7B /tmp/b0 6.7B 4 fsdp 32 14 $A
rm -rf /tmp/b0
torch 6.7B compile-blocks 20
torch 6.7B eager 20
ENVS="$N" TMO=200 train zero1-n9-6.7B /tmp/b0 6.7B 4 zero1 32 14 $A
rm -rf /tmp/b0
rm -rf "$D"; echo "=== end ($(date -u +%T))"; pack

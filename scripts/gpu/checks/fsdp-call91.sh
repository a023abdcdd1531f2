#!/usr/bin/env bash
# Call 91 (session 19), on a 4-GPU kind, from the packed folder (copy into .gpu/): fsdp
# after call 90's fixes (chunks that own only their elements; copies gathered from the
# masters, cast at launch; one stage of prefetch), beside PyTorch FSDP2 in the same call.
# A. xl bf16 w4, one GEMM table: zero1, zero2 (whole and sharded masters), fsdp: steps and
#    peaks; fsdp bit for bit as zero2 with sharded masters?
# B. 6.7B and 13B bf16 w4: fsdp, and PyTorch FSDP2 compile-blocks and eager
#    (anchors/torch_train_best.py), steps and peaks.
# Its helpers (as run) are now scripts/gpu/checks/train-runs.sh.
CALL=c91; TABLE_ONLY=xl; source "$(dirname "$0")/train-runs.sh"
echo "== A"
ENVS="" train zero1-xl /tmp/a0 xl 4 zero1 32 20 --fresh --ckpt-every 100000
ENVS="" train zero2-xl /tmp/a1 xl 4 zero2 32 20 --fresh --ckpt-every 100000
ENVS="ZERO1_MASTERS=sharded" train zero2-sharded-xl /tmp/a2 xl 4 zero2 32 20 --fresh --ckpt-every 100000
ENVS="" train fsdp-xl /tmp/a3 xl 4 fsdp 32 20 --fresh --ckpt-every 100000
same zero2-sharded-xl fsdp-xl
echo "== B"
ENVS="" TMO=200 train fsdp-6.7B /tmp/b1 6.7B 4 fsdp 32 14 --fresh --ckpt-every 100000
torch 6.7B compile-blocks 20
ENVS="" TMO=200 train fsdp-13B /tmp/b2 13B 4 fsdp 32 10 --fresh --ckpt-every 100000
torch 13B compile-blocks 12
torch 6.7B eager 20
torch 13B eager 12
rm -rf /tmp/a? /tmp/b? "$D"; echo "=== end ($(date -u +%T))"; pack

#!/usr/bin/env bash
# Call 93 (session 19), on a 4-GPU kind, from the packed folder (copy into .gpu/).
# Call 92 (world 2) found zero1 with sharded masters off whole masters' bits from step 1;
# its run was the one that made the GEMM table, each rank its own. Here the table comes
# from a run discarded first.
# A. xl bf16 w4, one GEMM table: zero1 sharded (default) against ZERO1_MASTERS=whole, bit for
#    bit?; zero2; fsdp (bit for bit as zero2?), FSDP_PREFETCH=2, FSDP_RESHARD_AFTER_FORWARD=0,
#    NCCL_MAX_CTAS=8.
# B. checkpoints, small bf16: fsdp w4 saves at step 10; resumed as zero1 w2 to 20, then as
#    bucketed:25 w1 to 30 (4 -> 2 -> 1).
# C. 6.7B bf16 w4: zero1 and zero2 (sharded masters): steps and peaks, for the plan.
# Its helpers (as run) are now scripts/gpu/checks/train-runs.sh.
CALL=c93; source "$(dirname "$0")/train-runs.sh"
W=4; G=$((8 * W))
echo "== A"
ENVS="ZERO1_MASTERS=whole" train table-xl /tmp/a0 xl $W zero1 $G 8 --fresh --ckpt-every 100000
ENVS="" train zero1-xl /tmp/a0 xl $W zero1 $G 20 --fresh --ckpt-every 100000
ENVS="ZERO1_MASTERS=whole" train zero1-whole-xl /tmp/a1 xl $W zero1 $G 20 --fresh --ckpt-every 100000
same zero1-whole-xl zero1-xl
ENVS="" train zero2-xl /tmp/a2 xl $W zero2 $G 20 --fresh --ckpt-every 100000
same zero1-whole-xl zero2-xl
ENVS="" train fsdp-xl /tmp/a3 xl $W fsdp $G 20 --fresh --ckpt-every 100000
same zero2-xl fsdp-xl
ENVS="FSDP_PREFETCH=2" train fsdp2ahead-xl /tmp/a4 xl $W fsdp $G 20 --fresh --ckpt-every 100000
same zero2-xl fsdp2ahead-xl
ENVS="FSDP_RESHARD_AFTER_FORWARD=0" train fsdpkeep-xl /tmp/a5 xl $W fsdp $G 20 --fresh --ckpt-every 100000
same zero2-xl fsdpkeep-xl
ENVS="NCCL_MAX_CTAS=8" train fsdp-ctas8-xl /tmp/a6 xl $W fsdp $G 20 --fresh --ckpt-every 100000
rm -rf /tmp/a?
echo "== C"
ENVS="" TMO=200 train zero1-6.7B /tmp/c1 6.7B 4 zero1 32 14 --fresh --ckpt-every 100000
ENVS="" TMO=200 train zero2-6.7B /tmp/c2 6.7B 4 zero2 32 14 --fresh --ckpt-every 100000
rm -rf /tmp/c?
echo "== B"
ENVS="" train s-ck /tmp/b1 small 4 fsdp 32 10 --fresh --ckpt-every 10
ENVS="" train s-resume-zero1-w2 /tmp/b1 small 2 zero1 32 20 --ckpt-every 100000
grep -h "resum" "$R/s-resume-zero1-w2.txt" | head -1 | cut -c1-200
ENVS="" train s-resume-bucketed-w1 /tmp/b1 small 1 bucketed:25 32 30 --ckpt-every 100000
grep -h "train loss" "$R"/s-*.txt | cut -c1-150
rm -rf /tmp/b? "$D"; echo "=== end ($(date -u +%T))"; pack

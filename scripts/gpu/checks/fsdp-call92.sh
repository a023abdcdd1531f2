#!/usr/bin/env bash
# Call 92 (session 19), on a 4-GPU kind, from the packed folder (copy into .gpu/):
# sharded f32 masters now train's default for zero1 and zero2 above one rank; fsdp's gathers.
# A. xl bf16 w4, one GEMM table: zero1 sharded (default) against ZERO1_MASTERS=whole, bit for
#    bit?; zero2; fsdp (bit for bit as zero2?), FSDP_PREFETCH=2, FSDP_RESHARD_AFTER_FORWARD=0.
# B. checkpoints, small bf16, one GEMM table: fsdp w4 saves at step 10; resumed as zero1 w4
#    (sharded masters) to 20: bit for bit as a straight zero1 w4 run?; then as zero1 w2 to
#    25 and bucketed:25 w1 to 30 (4 -> 2 -> 1).
# W=2 (when no 4-GPU kind is lent): world 2 in A and B, 16 rows a step, no C.
# C. 6.7B bf16 w4: zero1 and zero2 (sharded masters): steps and peaks, for the plan.
# Its helpers (as run) are now scripts/gpu/checks/train-runs.sh.
CALL=c92; source "$(dirname "$0")/train-runs.sh"
W=${W:-4}; G=$((8 * W))
echo "== A"
ENVS="" train zero1-xl /tmp/a0 xl $W zero1 $G 20 --fresh --ckpt-every 100000
ENVS="ZERO1_MASTERS=whole" train zero1-whole-xl /tmp/a1 xl $W zero1 $G 20 --fresh --ckpt-every 100000
same zero1-whole-xl zero1-xl
ENVS="" train zero2-xl /tmp/a2 xl $W zero2 $G 20 --fresh --ckpt-every 100000
ENVS="" train fsdp-xl /tmp/a3 xl $W fsdp $G 20 --fresh --ckpt-every 100000
same zero2-xl fsdp-xl
ENVS="FSDP_PREFETCH=2" train fsdp2ahead-xl /tmp/a4 xl $W fsdp $G 20 --fresh --ckpt-every 100000
same zero2-xl fsdp2ahead-xl
ENVS="FSDP_RESHARD_AFTER_FORWARD=0" train fsdpkeep-xl /tmp/a5 xl $W fsdp $G 20 --fresh --ckpt-every 100000
same zero2-xl fsdpkeep-xl
rm -rf /tmp/a?
echo "== B"
ENVS="" train s-straight /tmp/b0 small $W zero1 $G 20 --fresh --ckpt-every 100000
ENVS="" train s-ck /tmp/b1 small $W fsdp $G 10 --fresh --ckpt-every 10
ENVS="" train s-resume-zero1-w4 /tmp/b1 small $W zero1 $G 20 --ckpt-every 100000
grep -h "resum" "$R/s-resume-zero1-w4.txt" | head -1 | cut -c1-200
same s-straight s-resume-zero1-w4 10
[ $W = 4 ] && ENVS="" train s-resume-zero1-w2 /tmp/b1 small 2 zero1 $G 25 --ckpt-every 100000
ENVS="" train s-resume-bucketed-w1 /tmp/b1 small 1 bucketed:25 $G 30 --ckpt-every 100000
grep -h "train loss" "$R"/s-*.txt | cut -c1-150
rm -rf /tmp/b?
echo "== C"
[ $W = 4 ] || { rm -rf "$D"; echo "=== end ($(date -u +%T))"; pack; exit 0; }
ENVS="" TMO=200 train zero1-6.7B /tmp/c1 6.7B 4 zero1 32 14 --fresh --ckpt-every 100000
ENVS="" TMO=200 train zero2-6.7B /tmp/c2 6.7B 4 zero2 32 14 --fresh --ckpt-every 100000
rm -rf /tmp/c? "$D"; echo "=== end ($(date -u +%T))"; pack

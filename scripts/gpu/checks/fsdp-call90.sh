#!/usr/bin/env bash
# Call 90 (session 19), on a 4-GPU kind, from the packed folder (copy into .gpu/): the
# first GPU run of `--strategy fsdp`, and sharded masters checked bit for bit.
# 0. model-check's graph-memory probe: does a captured graph reuse what it frees?
# A. xl bf16 w4, one GEMM table: zero2 with ZERO1_MASTERS=sharded against whole masters,
#    and fsdp against zero2 sharded (fsdp gathers the same bf16 bits): equal bit for bit?
#    fsdp --eager: its peak.
# B. 6.7B bf16 w4: fsdp captured and --eager: step and peak (FSDP2: 208.6 ms, 26.4 GiB in
#    call 86, another call: no ratio from it).
# C. checkpoints: fsdp saves at step 10, resumed to 20 as zero1 w4: equal to A's fsdp?
# Its helpers (as run) are now scripts/gpu/checks/train-runs.sh.
CALL=c90; TABLE_ONLY=xl; source "$(dirname "$0")/train-runs.sh"
echo "== 0"
timeout 60 bin/bench model-check 2>&1 | grep "graph memory" | tee "$R/probe.txt"; pack
echo "== A"
ENVS="ZERO1_MASTERS=whole" train zero2-whole /tmp/a1 xl 4 zero2 32 20 --fresh --ckpt-every 100000
ENVS="ZERO1_MASTERS=sharded" train zero2-sharded /tmp/a2 xl 4 zero2 32 20 --fresh --ckpt-every 100000
same zero2-whole zero2-sharded
ENVS="" train fsdp-xl /tmp/a3 xl 4 fsdp 32 20 --fresh --ckpt-every 100000
same zero2-sharded fsdp-xl
ENVS="" train fsdp-xl-eager /tmp/a4 xl 4 fsdp 32 12 --fresh --ckpt-every 100000 --eager
echo "== B"
ENVS="" TMO=200 train fsdp-6.7B /tmp/b1 6.7B 4 fsdp 32 14 --fresh --ckpt-every 100000
ENVS="" TMO=200 train fsdp-6.7B-eager /tmp/b2 6.7B 4 fsdp 32 10 --fresh --ckpt-every 100000 --eager
echo "== C"
ENVS="" train ck-fsdp /tmp/c1 xl 4 fsdp 32 10 --fresh --ckpt-every 10
ENVS="" train ck-resume-zero1 /tmp/c1 xl 4 zero1 32 20 --ckpt-every 100000
same fsdp-xl ck-resume-zero1 10
rm -rf /tmp/a? /tmp/b? /tmp/c? "$D"; echo "=== end ($(date -u +%T))"; pack

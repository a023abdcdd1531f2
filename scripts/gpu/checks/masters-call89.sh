#!/usr/bin/env bash
# Call 89 (session 18; call 88 ran masters-call88.sh and timed out: --steps 30 runs end
# with samples and a checkpoint, 80 s each; here --stop-after, results tarred after each job), on a 4-GPU kind, from the packed folder (copy into .gpu/): ZeRO's
# sharded f32 masters (zero1::masters, train's default for zero1 and zero2 above one rank).
# A. xl bf16 w4, 30 steps, one GEMM table: zero1 and zero2 with sharded masters against
#    ZERO1_MASTERS=whole: every loss and norm equal, bit for bit?
# B. checkpoints: zero1 (sharded masters) saves at step 10 and 20, stops at 20; resumed to
#    30 as zero1 w4 (equal to A's straight run from step 21 on?), as bucketed:25 w4, and
#    as zero1 w2 (16 rows a GPU).
# C. peaks and steps: bench single --clip 1; xl single w1; zero1 (default and adamw:2),
#    zero2 at w4; 6.7B zero1 and zero2 at w4, zero2 at w2. Results under $OUT/c.
# Its helpers (as run) are now scripts/gpu/checks/train-runs.sh.
CALL=c89; TABLE_ONLY=xl; source "$(dirname "$0")/train-runs.sh"
T="$R/gemm-xl.json"
echo "== A"
ENVS="" train single-xl-w1 /tmp/c xl 1 single 8 30 --fresh --ckpt-every 100000
ENVS="ZERO1_MASTERS=whole" train zero1-whole /tmp/a1 xl 4 zero1 32 30 --fresh --ckpt-every 100000
ENVS="" train zero1-sharded /tmp/a2 xl 4 zero1 32 30 --fresh --ckpt-every 100000
same zero1-whole zero1-sharded
ENVS="ZERO1_MASTERS=whole" train zero2-whole /tmp/a3 xl 4 zero2 32 20 --fresh --ckpt-every 100000
ENVS="" train zero2-sharded /tmp/a4 xl 4 zero2 32 20 --fresh --ckpt-every 100000
same zero2-whole zero2-sharded
echo "== B"
ENVS="" train ck-first /tmp/b xl 4 zero1 32 20 --fresh --ckpt-every 10
for s in "zero1 4" "bucketed:25 4"; do set -- $s
  rm -rf /tmp/b2; cp -r /tmp/b /tmp/b2
  ENVS="" train "ck-resume-${1%%:*}-w$2" /tmp/b2 xl $2 $1 32 30 --ckpt-every 100000
  grep -h "resum" "$R/ck-resume-${1%%:*}-w$2.txt" | head -2 | cut -c1-200
done
same zero1-sharded ck-resume-zero1-w4 20
same zero1-sharded ck-resume-bucketed-w4 20
echo "== C"
timeout 100 bin/bench single --size xl --dtype bf16 --mode step --batch 8 --vocab "$vocab" --warmup 5 --steps 35 \
  --gemm-choices "$T" --clip 1 --out "$R/results.jsonl" | tail -1; pack
ENVS="ZERO1_PARAM_GATHER=adamw:2" train zero1-xl-w4-adamw2 /tmp/c xl 4 zero1 32 30 --fresh --ckpt-every 100000
ENVS="" train zero1-6.7B-w4 /tmp/c 6.7B 4 zero1 32 14 --fresh --ckpt-every 100000
ENVS="" train zero2-6.7B-w4 /tmp/c 6.7B 4 zero2 32 14 --fresh --ckpt-every 100000
ENVS="" train zero2-6.7B-w2 /tmp/c 6.7B 2 zero2 16 14 --fresh --ckpt-every 100000
rm -rf /tmp/a? /tmp/b /tmp/b2 /tmp/c "$D"; echo "=== end ($(date -u +%T))"; pack

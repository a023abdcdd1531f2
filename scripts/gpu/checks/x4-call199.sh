#!/usr/bin/env bash
# Session 36, call 199: FOUR GPUs, from the packed folder (copy this into .gpu/). About 3
# minutes. Issue 47's world-2 DDP bar with split DDP's norm from the copy-engine adds (the
# default from this session: ddp::squares): `run.sh train-speed` at worlds 1 and 2, single
# and bucketed:25, beside `bench single --clip 1`; then 12 eager steps against the replayed
# ones at world 2 (train-runs.sh).
export NCCL_NVLS_ENABLE=0
H="$(cd "$(dirname "$0")" && pwd)"; O="${OUT:-/tmp/out}"; mkdir -p "$O/c"
export OUT="$O/c"
CASES=xl:bf16 TS_WORLDS="1 2" TS_STEPS=30 TS_STRATEGIES="single bucketed:25" TS_TORCH_WORLDS="9" \
  timeout 200 bash "$H/run.sh" train-speed 2>&1 | tee "$OUT/log.txt" | grep -v "^\[rank" | cut -c1-200 | tail -8
rm -rf "$OUT/train-speed/data" "$OUT/train-speed/run-"*; tar czf "$O/c.tgz" -C "$O" c
( OUT=$O; CALL=c199; source "$H/train-runs.sh"
  xl d2 2 bucketed:25 $N DDP_NORM_LOG=1
  ENVS="$N" train d2e /tmp/r-d2e xl 2 bucketed:25 16 12 --fresh --eager
  same d2 d2e; grep -h 'ddp norm' "$R/d2.txt" | sort | uniq -c | head -2 )
echo "done $(date -u +%T)"

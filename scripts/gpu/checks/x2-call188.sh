#!/usr/bin/env bash
# Session 34, call 188: TWO GPUs (nvidia-h200-x2), from the packed folder (copy this and
# train-runs.sh into .gpu/). About 3 minutes. The final defaults (split DDP gathering in the
# backward at world 2 and reading its parts for the norm; ZeRO-1's norm from the adds):
# the world-2 bars (`run.sh train-speed`, worlds 1 and 2), then DDP eager against replayed.
export NCCL_NVLS_ENABLE=0
H="$(cd "$(dirname "$0")" && pwd)"; O="${OUT:-/tmp/out}"
export OUT="$O/c"; mkdir -p "$OUT"
CASES=xl:bf16 TS_WORLDS="1 2" TS_STEPS=30 TS_STRATEGIES="single bucketed:25 zero1" TS_TORCH_WORLDS="9" \
  bash "$H/run.sh" train-speed 2>&1 | tee "$OUT/log.txt" | grep -v "^\[rank" | cut -c1-200 | tail -9
rm -rf "$OUT/train-speed/data" "$OUT/train-speed/run-"*; tar czf "$O/c.tgz" -C "$O" c
( OUT=$O; CALL=x2c188; source "$H/train-runs.sh"; export TMO=60
ENVS="$N" train b2 /tmp/r-b2 xl 2 bucketed:25 16 12 --fresh
ENVS="$N" train b2-e /tmp/r-b2-e xl 2 bucketed:25 16 12 --fresh --eager
same b2 b2-e
pack )
echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Session 34, call 187: TWO GPUs (nvidia-h200-x2), from the packed folder (copy this and
# train-runs.sh into .gpu/). About 5 minutes. Call 186 again after its fix: the norm's
# buffer is made once (a tensor made before the capture was dropped inside it, which CUDA
# refuses: the step ran eager). Split DDP and ZeRO-1 with the norm from the adds against
# DDP_SUMSQ=0, eager against replayed, then the world-2 bars (`run.sh train-speed`).
export NCCL_NVLS_ENABLE=0
H="$(cd "$(dirname "$0")" && pwd)"; O="${OUT:-/tmp/out}"
( CALL=x2c187; source "$H/train-runs.sh"; export TMO=90
xl b2 2 bucketed:25 $N
xl b2-parts 2 bucketed:25 $N DDP_SUMSQ=0
xl z2 2 zero1 $N
xl z2-parts 2 zero1 $N DDP_SUMSQ=0
ENVS="$N" train b2-e /tmp/r-b2-e xl 2 bucketed:25 16 12 --fresh --eager
same b2 b2-e
ENVS="$N" train z2-e /tmp/r-z2-e xl 2 zero1 16 12 --fresh --eager
same z2 z2-e
for f in b2 z2; do grep -h "step:" $R/$f.txt | head -1 | cut -c1-120; done
pack )
export OUT="$O/c"; mkdir -p "$OUT"
CASES=xl:bf16 TS_WORLDS="1 2" TS_STEPS=30 TS_STRATEGIES="single bucketed:25 zero1" TS_TORCH_WORLDS="9" \
  bash "$H/run.sh" train-speed 2>&1 | tee "$OUT/log.txt" | grep -v "^\[rank" | cut -c1-200 | tail -12
rm -rf "$OUT/train-speed/data" "$OUT/train-speed/run-"*; tar czf "$O/c.tgz" -C "$O" c
echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Session 35, call 189: FOUR GPUs (nvidia-h200-x4), from the packed folder (copy this,
# ce-probe.py and train-runs.sh into .gpu/). About 8 minutes.
# 1. ce-probe at world 4: whether a peer's copy split over 2 or 4 streams brings in more
#    than the ~200 GB/s of one stream a peer (session 30), alone and beside the GEMMs.
# 2. Issue 47's bars with session 34's defaults: `run.sh train-speed` at worlds 1, 2 and 4.
# 3. 32 rows: single, bucketed:25 and zero1 at world 4.
# 4. One replay's CUPTI timeline of zero1 and bucketed:25 at world 4.
export NCCL_NVLS_ENABLE=0
H="$(cd "$(dirname "$0")" && pwd)"; O="${OUT:-/tmp/out}"; mkdir -p "$O/p"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$O/p/gpu.txt"
W=4 REPS=3 MODES="ce-ag gemm+ce-ag ce-ag-s2 gemm+ce-ag-s2 ce-ag-s4 gemm+ce-ag-s4 ce-ag-push ce-ag-push-s2 ce-ag-push-s4 gemm+ce-ag-push-s4 nccl-ag gemm+nccl-ag" \
  timeout 90 python3 "$H/ce-probe.py" > "$O/p/probe.txt" 2>&1; echo "probe rc $?"; grep -v '^{' "$O/p/probe.txt" | tail -16
export OUT="$O/c"; mkdir -p "$OUT"
CASES=xl:bf16 TS_WORLDS="1 2 4" TS_STEPS=30 TS_STRATEGIES="single bucketed:25 zero1" TS_TORCH_WORLDS="9" \
  timeout 300 bash "$H/run.sh" train-speed 2>&1 | tee "$OUT/log.txt" | grep -v "^\[rank" | cut -c1-200 | tail -12
rm -rf "$OUT/train-speed/data" "$OUT/train-speed/run-"*; tar czf "$O/c.tgz" -C "$O" c
( OUT=$O; CALL=x4c189; source "$H/train-runs.sh"; export TMO=75
  train single32 /tmp/r-s32 xl 1 single 32 16 --fresh
  ENVS="$N" train z4s32 /tmp/r-z4s32 xl 4 zero1 128 16 --fresh
  ENVS="$N" train b4s32 /tmp/r-b4s32 xl 4 bucketed:25 128 16 --fresh
  env $N TRACE_KEEP=1 TRACE_BATCH=8 TRACE_STRATEGIES="zero1 bucketed:25" TRACE_WORLD=4 OUT=$R timeout 150 bash run.sh trace > "$R/trace-job.txt" 2>&1 || echo "trace failed"
  traces 3
  pack )
echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/world4-call81.sh`. Results: $OUT/call81/.
# Session 17, call 81 (nvidia-h100-x4 or nvidia-h200-x4; the first 4-GPU kind lent since
# session 13): correctness at world 4 before the timed runs.
# 1. bench model-check (56 OK expected, as call 77).
# 2. bench zero1-check at world 4 (save, resume with other buckets, equal trajectory).
# 3. Issue 47: 10 steps of train run at world 4 as one CUDA graph against 10 eager steps
#    (--eager), small bf16, zero1 and bucketed:25, one GEMM table: the losses per step.
# 4. Issue 49: small bf16 ZeRO-1 at world 4, 60 steps, a checkpoint every 10; never killed,
#    then rank 1 kill -9'd at step 23 and rank 2 at step 47 of the restarted job under
#    comm-launch --max-restarts 3: exit 0, every step logged once, losses bit-identical.
# 5. The NCCL all-reduce sweep at 2 and 4 ranks (the report's table; results.jsonl).
# 6. Where `sharded` fails on CUDA (call 80): bench zero1 --modes sharded, small, world 2.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
C="${CALL:-call81}"; R="${OUT:-/tmp/out}/$C"; mkdir -p "$R"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$R/gpu.txt"
echo "=== model-check ($(date -u +%T))"
timeout 150 bin/bench model-check > "$R/model-check.txt" 2>&1; echo "model-check rc $?"
grep -c ": OK" "$R/model-check.txt"; grep -iE "rror|FAIL" "$R/model-check.txt" | head -5
echo "=== zero1-check world 4 ($(date -u +%T))"
OUT="$R" timeout 120 bash ./run.sh zero1-check > "$R/zero1-check.txt" 2>&1; echo "zero1-check rc $?"; tail -3 "$R/zero1-check.txt"
echo "=== NCCL all-reduce sweep, 2 and 4 ranks ($(date -u +%T))"
OUT="$R" ALLREDUCE_ARGS="--ranks 2,4" timeout 120 bash ./run.sh allreduce > "$R/allreduce.txt" 2>&1; echo "allreduce rc $?"; tail -4 "$R/allreduce.txt"
D=/tmp/d81; bin/train prepare --data "$D" > /dev/null 2>&1
T="$R/gemm-small.json"
go() { # out, extra launcher flags..., --, extra train flags...
  local out="$1"; shift; local lf=(); while [ "$1" != -- ]; do lf+=("$1"); shift; done; shift
  timeout 150 bin/comm-launch --nproc-per-node 4 "${lf[@]}" -- bin/train run --data "$D" --out "$out" --model small --bf16 --global-batch 32 \
    --steps 2000 --eval-every 100000 --ckpt-every 10 --backend nccl --no-progress --max-new 1 "$@"
}
losses() { python3 -c "import json,sys; print([json.loads(l)['loss'] for l in open(sys.argv[1]) if '\"train\"' in l])" "$1/log.jsonl"; }
cmp() { python3 - "$@" <<'PY'
import ast, sys
a, b = (ast.literal_eval(open(f).read()) for f in sys.argv[1:3])
d = max((abs(x - y) / abs(x) for x, y in zip(a, b)), default=float("nan"))
print(sys.argv[3], "steps logged", len(a), len(b), "; bit-identical:", a == b, "; max rel diff %.3g" % d, "; last", a[-1] if a else None, b[-1] if b else None)
PY
}
echo "=== clean, zero1 world 4 ($(date -u +%T))"
rm -rf /tmp/clean; go /tmp/clean -- --strategy zero1 --fresh --stop-after 60 > "$R/clean.txt" 2>&1; echo "rc $?"
cp /tmp/clean/gemm-choices.json "$T" 2>/dev/null || ls /tmp/clean
losses /tmp/clean > "$R/clean.losses"
echo "=== graph vs eager, world 4 ($(date -u +%T))"
for st in zero1 bucketed:25; do
  rm -rf /tmp/g /tmp/e
  go /tmp/g -- --strategy $st --fresh --stop-after 10 --gemm-choices "$T" > "$R/graph-${st%%:*}.txt" 2>&1; echo "graph $st rc $?"
  go /tmp/e -- --strategy $st --fresh --stop-after 10 --gemm-choices "$T" --eager > "$R/eager-${st%%:*}.txt" 2>&1; echo "eager $st rc $?"
  grep -h "train: step:" "$R/graph-${st%%:*}.txt" "$R/eager-${st%%:*}.txt" | cut -c1-120
  losses /tmp/g > "$R/graph-${st%%:*}.losses"; losses /tmp/e > "$R/eager-${st%%:*}.losses"
  cmp "$R/graph-${st%%:*}.losses" "$R/eager-${st%%:*}.losses" "graph vs eager $st:"
done
echo "=== two kill -9s under --max-restarts 3, world 4 ($(date -u +%T))"
rm -rf /tmp/killed; TRAIN_FAULT_KILL="1:23:0,2:47:1" go /tmp/killed --max-restarts 3 -- --strategy zero1 --fresh --stop-after 60 --gemm-choices "$T" > "$R/killed.txt" 2>&1; echo "rc $?"
grep -E "restart|TRAIN_FAULT" "$R/killed.txt" | head -6
losses /tmp/killed > "$R/killed.losses"
cmp "$R/clean.losses" "$R/killed.losses" "killed twice vs never killed:"
rm -rf /tmp/clean /tmp/killed /tmp/g /tmp/e "$D"
for g in false true; do
  echo "=== bench zero1 --modes sharded --graph $g, small bf16, world 2 ($(date -u +%T))"
  CUDA_VISIBLE_DEVICES=0,1 timeout 45 bin/bench zero1 --backend nccl --ranks 2 --size small --dtype bf16 --modes sharded --graph $g \
    --out "$R/sharded.jsonl" > "$R/sharded-graph-$g.txt" 2>&1; echo "sharded graph $g rc $?"; grep -iE "rror|illegal|ms" "$R/sharded-graph-$g.txt" | head -4
done
echo "=== end ($(date -u +%T))"

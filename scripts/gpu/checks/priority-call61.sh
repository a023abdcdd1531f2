#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/priority-call61.sh`. Results: $OUT/call61.tgz.
# Session 13, call 61 (nvidia-h100-x2 asked for; the reply names the kind), xl bf16, batch
# 8 x 128 per GPU, world 2. Calls 58-60: bucketed:25 1.23x and zero1 1.47x one GPU's step;
# the 4 GB all-reduce alone takes ~12.5 ms (call 59), and most of it is not hidden behind
# the ~26 ms backward. Does NCCL's stream at the highest priority (COMM_NCCL_STREAM_PRIORITY=
# high; graphs now keep each node's captured priority) let the collectives keep pace?
# Alternated: default, high, default, high; bucketed:25 and zero1; one GEMM table.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
C="${CALL:-call61}"; R="${OUT:-/tmp/out}/$C"; mkdir -p "$R"
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,memory.total --format=csv,noheader | tee "$R/gpu.txt"
D=/tmp/d61; bin/train prepare --data "$D" > /dev/null 2>&1
# The GEMM table: one run at world 1.
timeout 90 bin/train run --data "$D" --out /tmp/r-table --model xl --bf16 --global-batch 8 --steps 100000 --stop-after 8 \
  --eval-every 100000 --ckpt-every 100000 --strategy single --backend nccl --world 1 --fresh --no-progress > "$R/table.txt" 2>&1 || tail -3 "$R/table.txt"
T="$R/gemm-xl-bf16.json"; cp /tmp/r-table/gemm-choices.json "$T"; rm -rf /tmp/r-table
run2() { # name priority strategy
  rm -rf "/tmp/r-$1"
  timeout 70 env COMM_NCCL_STREAM_PRIORITY="$2" bin/comm-launch --nproc-per-node 2 -- bin/train run --data "$D" --out "/tmp/r-$1" \
    --model xl --bf16 --global-batch 16 --steps 100000 --stop-after 40 --eval-every 100000 --ckpt-every 100000 --strategy "$3" \
    --backend nccl --fresh --no-progress --gemm-choices "$T" > "$R/$1.txt" 2>&1 || { tail -3 "$R/$1.txt"; return; }
  cp "/tmp/r-$1/log.jsonl" "$R/$1.jsonl"
  python3 - "/tmp/r-$1/log.jsonl" "$1" "$2" "$3" <<'PY' | tee -a "$R/priority.jsonl"
import json, statistics, sys
t = [r for r in map(json.loads, open(sys.argv[1])) if r.get("type") == "train"]
tps = statistics.median(r["tokens_per_s"] for r in t if r["step"] >= 6)
print(json.dumps({"run": sys.argv[2], "priority": sys.argv[3], "strategy": sys.argv[4], "world": 2,
                  "step_ms": round(16 * 128 / tps * 1e3, 3), "loss_last": t[-1]["loss"]}))
PY
  rm -rf "/tmp/r-$1"
}
for round in a b; do
  for pr in default high; do
    run2 "bucketed-$pr-$round" "$pr" bucketed:25
    run2 "zero1-$pr-$round" "$pr" zero1
  done
done
rm -rf "$D"
tar czf "${OUT:-/tmp/out}/$C.tgz" -C "$(dirname "$R")" "$C" && rm -rf "$R"
echo "=== end ($(date -u +%T))"

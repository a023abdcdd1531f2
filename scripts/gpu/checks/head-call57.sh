#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/head-call57.sh`. Results: $OUT/call57.tgz.
# Session 13, call 57: the build of 8c41e26 (session 12's last mends: InBackward::stage,
# bench contention's flags) on the GPU: bench model-check, and 20 steps of train run small
# bf16 single, zero1 and bucketed:25 with one GEMM table, logs compared (same bits).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R="${OUT:-/tmp/out}/call57"; mkdir -p "$R"; D=/tmp/c57data
timeout 150 bin/bench model-check > "$R/model-check.txt" 2>&1; echo "model-check rc $?"
grep -E "CUDA graph|validation graph" "$R/model-check.txt" | sed 's/: TrainStep.*TrainStep, / /' | cut -c1-150
bin/train prepare --data "$D" > /dev/null 2>&1
T=(); for st in single zero1 bucketed:25; do
  d="/tmp/c57-${st%%:*}"; rm -rf "$d"
  timeout 90 bin/train run --data "$D" --out "$d" --model small --bf16 --global-batch 8 --steps 100000 --stop-after 20 \
    --eval-every 100000 --ckpt-every 100000 --strategy "$st" --backend nccl --world 1 --fresh --no-progress "${T[@]}" > /dev/null 2>&1 || echo "$st failed"
  [ ${#T[@]} -eq 0 ] && cp "$d/gemm-choices.json" "$R/gemm.json" && T=(--gemm-choices "$R/gemm.json")
  cp "$d/log.jsonl" "$R/${st%%:*}.jsonl"; rm -rf "$d"
done
python3 - "$R" <<'PY'
import json, sys, os
L = lambda n: [json.loads(l) for l in open(os.path.join(sys.argv[1], n + ".jsonl")) if '"train"' in l]
a = L("single")
for n in ("zero1", "bucketed"):
    b = L(n)
    print(n, "vs single:", len(b), "steps, max |d loss|", max(abs(x["loss"] - y["loss"]) for x, y in zip(a, b)),
          "max |d norm|", max(abs(x["grad_norm"] - y["grad_norm"]) for x, y in zip(a, b)))
PY
tar czf "${OUT:-/tmp/out}/call57.tgz" -C "$(dirname "$R")" call57 && rm -rf "$R" "$D"
echo "=== end ($(date -u +%T))"

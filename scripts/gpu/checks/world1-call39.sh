#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/world1-call39.sh`. Results: $OUT/call39.tgz.
# Session 10, call 39 (nvidia-h100-x1), after ZeRO-1 on one rank took its norm in parameter
# order: (1) train run small bf16 single, bucketed:25, zero1 for 40 steps with one GEMM
# table, their logs compared step by step (one rank: the same bits expected); (2)
# train-speed xl fp32 (single, bucketed:25, zero1; no PyTorch); (3) bench ddp and bench
# zero1 at NCCL world 1, small and xl bf16; (4) model-check.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R="${OUT:-/tmp/out}/call39"; mkdir -p "$R/logs"; D=/tmp/c39data
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader
bin/train prepare --data "$D" > /dev/null 2>&1 || echo "prepare failed"
echo "=== (1) small bf16, one rank, log against log ($(date -u +%T))"
T=(); for st in single bucketed:25 zero1; do
  d="/tmp/c39-${st%%:*}"; rm -rf "$d"
  timeout 120 bin/train run --data "$D" --out "$d" --model small --bf16 --global-batch 8 --steps 100000 --stop-after 40 \
    --eval-every 100000 --ckpt-every 100000 --strategy "$st" --backend nccl --world 1 --fresh --no-progress "${T[@]}" 2>&1 | grep -E "step:|rror"
  [ ${#T[@]} -eq 0 ] && cp "$d/gemm-choices.json" "$R/logs/gemm-small-bf16.json" && T=(--gemm-choices "$R/logs/gemm-small-bf16.json")
  cp "$d/log.jsonl" "$R/logs/${st%%:*}.jsonl"; rm -rf "$d"
done
python3 - "$R/logs" <<'PY'
import json, sys, os
L = lambda n: [json.loads(l) for l in open(os.path.join(sys.argv[1], n + ".jsonl")) if '"train"' in l]
a = L("single")
for n in ("bucketed", "zero1"):
    b = L(n)
    dl = max(abs(x["loss"] - y["loss"]) for x, y in zip(a, b))
    dn = max(abs(x.get("grad_norm", 0) - y.get("grad_norm", 0)) for x, y in zip(a, b))
    print(f"{n:9} vs single: {min(len(a), len(b))} steps, max |d loss| {dl:.3e}, max |d norm| {dn:.3e}")
PY
rm -rf "$D"
echo "=== (2) train-speed xl fp32 ($(date -u +%T))"
OUT="$R" CASES="xl:fp32" TS_STRATEGIES="single bucketed:25 zero1" TS_TORCH=" " \
  timeout 240 bash run.sh train-speed 2>&1 | grep -E "^(size|xl|small) |rror"
echo "=== (3) bench ddp / zero1, NCCL world 1 ($(date -u +%T))"
timeout 150 bin/bench ddp --backend nccl --ranks 1 --size small,xl --dtype bf16 --strategies bucketed --buckets-mb 25 \
  --coalesce true --out "$R/bench.jsonl" 2>&1 | tail -4
for s in small xl; do
  timeout 100 bin/bench zero1 --backend nccl --ranks 1 --size $s --dtype bf16 --modes ddp,zero1-ahead --bucket-mb 25 \
    --coalesce --out "$R/bench.jsonl" 2>&1 | tail -3
done
echo "=== (4) model-check ($(date -u +%T))"
timeout 120 bin/bench model-check > "$R/model-check.txt" 2>&1; echo "model-check rc $?"; grep -iE "fail|graph|replay" "$R/model-check.txt" | tail -12
tar czf "${OUT:-/tmp/out}/call39.tgz" -C "$(dirname "$R")" call39 && rm -rf "$R"
echo "=== end ($(date -u +%T))"

#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/atgemm-call29.sh`. Results: $OUT/call29.tgz.
# Session 9, call 29 (nvidia-h100-x1), an experiment since reverted: the clipping norm at the
# GEMM (STEP_NORM=at-gemm, in that build only:
# each block weight gradient summed right after the GEMM that wrote it, while in L2).
# 1. model-check under STEP_NORM=at-gemm (graph against eager, with the offers captured).
# 2. small, 30 steps, fp32 and bf16: the logged gradient norms, after against at-gemm.
# 3. train-speed xl bf16 (no PyTorch): STEP_NORM=after, then at-gemm, each with its own
#    bench single baseline.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R="${OUT:-/tmp/out}/call29"; mkdir -p "$R"
echo "=== model-check, at-gemm ($(date -u +%T))"
STEP_NORM=at-gemm bin/bench model-check > "$R/model-check.txt" 2>&1; echo "rc $?"
grep -c ": OK" "$R/model-check.txt"; grep -i -E "fail|error" "$R/model-check.txt" | head -5
echo "=== norms, after vs at-gemm ($(date -u +%T))"
P=/tmp/nrm; rm -rf "$P"; mkdir -p "$P"; bin/train prepare --data "$P/data" > /dev/null 2>&1 || exit 1
for dt in fp32 bf16; do for pl in after at-gemm; do
  STEP_NORM=$pl bin/train run --data "$P/data" --out "$P/$dt-$pl" --model small --global-batch 8 --steps 30 \
    --eval-every 1000 --ckpt-every 1000 --backend nccl --world 1 --no-progress --fresh \
    $([ $dt = bf16 ] && echo --bf16) > "$R/$dt-$pl.txt" 2>&1 || tail -3 "$R/$dt-$pl.txt"
  cp "$P/$dt-$pl/log.jsonl" "$R/$dt-$pl.jsonl"; grep -m1 "^train: step:" "$R/$dt-$pl.txt"
done; done
python3 - "$R" <<'PY'
import json, sys
d = sys.argv[1]
for dt in ("fp32", "bf16"):
    n = lambda p: [r["grad_norm"] for r in map(json.loads, open(f"{d}/{dt}-{p}.jsonl")) if r["type"] == "train"]
    a, b = n("after"), n("at-gemm")
    rel = [abs(x - y) / y for x, y in zip(a, b)]
    print(f"{dt}: steps {len(a)}/{len(b)}; step-1 norm {a[0]:.9g} / {b[0]:.9g}; rel diff step 1 {rel[0]:.2e}, first 5 max {max(rel[:5]):.2e}")
PY
rm -rf "$P"
for pl in after at-gemm; do
  echo "=== train-speed xl bf16, STEP_NORM=$pl ($(date -u +%T))"
  STEP_NORM=$pl OUT="$R/$pl" CASES="xl:bf16" TS_STRATEGIES="single bucketed:25 zero1" TS_TORCH=" " \
    bash run.sh train-speed 2>&1 | grep -E "^(size|xl) |rror"
done
tar czf "${OUT:-/tmp/out}/call29.tgz" -C "$(dirname "$R")" call29 && rm -rf "$R"
echo "=== end ($(date -u +%T))"

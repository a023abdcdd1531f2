#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/best-call56.sh`. Results: $OUT/call56.tgz.
# Session 12, call 56 (asked for nvidia-h200): the README's single-GPU ratio against
# torch.compile (torch_best.py: median of 20 steps after 6) with bench single over the same
# window (--warmup 6 --steps 20, median), beside bench single's default window (10 after 3,
# mean) and train-speed's (35 after 5); xl bf16 and fp32, one GEMM table per dtype.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R="${OUT:-/tmp/out}/call56"; mkdir -p "$R"
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader | tee "$R/gpu.txt"
for dt in bf16 fp32; do
  T="$R/gemm-$dt.json"
  for w in "3 10" "6 20" "5 35" "6 20" "3 10"; do
    set -- $w; [ -f "$T" ] && t=(--gemm-choices "$T") || t=(--save-gemm-choices "$T")
    timeout 120 bin/bench single --size xl --dtype $dt --mode step --warmup $1 --steps $2 "${t[@]}" \
      --out "$R/single.jsonl" | tail -1
  done
done
echo "=== torch_best ($(date -u +%T))"
DTYPES=bf16,fp32 timeout 330 python3 anchors/torch_best.py xl compile,compile-ro 2> "$R/torch.err" | grep '^{' | tee "$R/torch.jsonl"
python3 - "$R" <<'PY'
import json, sys
r = sys.argv[1]
s = [json.loads(l) for l in open(f"{r}/single.jsonl")]
t = [json.loads(l) for l in open(f"{r}/torch.jsonl") if "step_ms" in l]
for dt in ("bf16", "fp32"):
    best = min((x for x in t if x["dtype"] == dt), key=lambda x: x["step_ms"], default=None)
    for x in (x for x in s if x["dtype"] == dt):
        med = x["step_median_ms"]
        q = f"÷ torch {best['variant']} {best['step_ms']:.2f}: mean {x['step_ms'][0] / best['step_ms']:.3f}, median {med / best['step_ms']:.3f}" if best else ""
        print(f"xl {dt} {x['steps']:3} steps: mean {x['step_ms'][0]:8.2f}, median {med:8.2f}  {q}")
PY
tar czf "${OUT:-/tmp/out}/call56.tgz" -C "$(dirname "$R")" call56 && rm -rf "$R"
echo "=== end ($(date -u +%T))"

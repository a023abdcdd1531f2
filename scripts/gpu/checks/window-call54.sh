#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/window-call54.sh`. Results: $OUT/call54.tgz.
# Session 12, call 54: issue 33's train-speed with bench single timed over train run's
# window (5 warm-up steps, then 35, the median) for small bf16, xl bf16 and xl fp32:
# single, bucketed:25, zero1 and the PyTorch trainer (compile-ro, bf16 only: its bar is
# bf16's). Then bench single at its default window (10 after 3) on the same GEMM tables,
# the window train-speed used before, for the comparison.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
C="${CALL:-call54}"; R="${OUT:-/tmp/out}/$C"; mkdir -p "$R"
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,memory.total --format=csv,noheader | tee "$R/gpu.txt"
OUT="$R" CASES="small:bf16 xl:bf16" TS_STRATEGIES="single bucketed:25 zero1" TS_TORCH="compile-ro" \
  timeout 330 bash run.sh train-speed 2>&1 | grep -E "^(size|xl|small) |rror|---"
mkdir -p "$R/fp32"
OUT="$R/fp32" CASES="xl:fp32" TS_STRATEGIES="single bucketed:25 zero1" TS_TORCH=" " \
  timeout 170 bash run.sh train-speed 2>&1 | grep -E "^(size|xl|small) |rror"
echo "=== bench single, default window (10 after 3) ($(date -u +%T))"
for c in small xl; do
  timeout 60 bin/bench single --size $c --dtype bf16 --mode step --vocab 683 \
    --gemm-choices "$R/train-speed/gemm-$c-bf16.json" --out "$R/default-window.jsonl" | tail -1
done
python3 - "$R" <<'PY'
import json, sys
r = sys.argv[1]
rows = [json.loads(l) for f in ("results.jsonl", "fp32/results.jsonl") for l in open(f"{r}/{f}")]
torch = [json.loads(l) for l in open(f"{r}/torch.jsonl")]
dflt = [json.loads(l) for l in open(f"{r}/default-window.jsonl")]
print(f"{'case':10} {'what':26} {'ms':>9} {'÷ single':>9} {'÷ PyTorch':>9}")
for size, dt in (("small", "bf16"), ("xl", "bf16"), ("xl", "fp32")):
    sg = [x for x in rows if x.get("bench") == "single" and x["size"] == size and x["dtype"] == dt]
    base = [x for x in sg if not x.get("norm")][0]["step_median_ms"]
    pt = [t["step_ms"] for t in torch if t["size"] == size and t["dtype"] == dt]
    pt = pt[0] if pt else None
    def row(w, ms):
        q = f"{ms / pt:9.3f}" if pt and w.startswith("train") else " " * 9
        print(f"{size + ' ' + dt:10} {w:26} {ms:9.3f} {ms / base:9.3f} {q}")
    row("bench single (35, median)", base)
    for x in sg:
        if x.get("norm"):
            row("bench single --clip 1", x["step_median_ms"])
    for x in rows:
        if x.get("bench") == "train" and x["size"] == size and x["dtype"] == dt:
            row("train run " + x["strategy"], x["step_ms"])
    for x in dflt:
        if x["size"] == size and x["dtype"] == dt:
            row("bench single (10, mean)", x["step_ms"][0])
    if pt:
        row("PyTorch trainer", pt)
PY
tar czf "${OUT:-/tmp/out}/$C.tgz" -C "$(dirname "$R")" "$C" && rm -rf "$R"
echo "=== end ($(date -u +%T))"

#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/spread-call30.sh`. Results: $OUT/call30.tgz.
# Session 9, call 30 (nvidia-h100-x1): how far two runs of ONE trainer part under
# train-parity's fp32 configuration (seed 0), against the 0.02 bar.
# Ours: A tuned GEMMs (the default; exports the initial weights), B MODEL_GEMM_TUNE=0 (the
# first heuristic everywhere). Torch (anchors/torch_train.py from A's weights): its default
# BLAS, cuBLAS and cuBLASLt (--blas). Every pair through `train compare --last 200`.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R="${OUT:-/tmp/out}/call30"; mkdir -p "$R"
P=/tmp/spread; rm -rf "$P"; mkdir -p "$P"
bin/train prepare --data "$P/data" > /dev/null 2>&1 || exit 1
A=(--model small --global-batch 8 --lr 1e-3 --min-lr 1e-4 --warmup 100 --eval-every 100 --steps 2000
   --ckpt-every 2000 --keep 1 --backend nccl --world 1 --no-progress --fresh)
echo "=== ours A ($(date -u +%T))"
bin/train run --data "$P/data" --out "$P/A" "${A[@]}" --export-init > "$R/ours-A.txt" 2>&1 || tail -3 "$R/ours-A.txt"
cp "$P/A/log.jsonl" "$R/ours-A.jsonl"
echo "=== ours B and torch x3, side by side ($(date -u +%T))"
(MODEL_GEMM_TUNE=0 bin/train run --data "$P/data" --out "$P/B" "${A[@]}" > "$R/ours-B.txt" 2>&1 || tail -3 "$R/ours-B.txt"
 cp "$P/B/log.jsonl" "$R/ours-B.jsonl") &
for b in default cublas cublaslt; do
  python3 anchors/torch_train.py --data "$P/data" --run "$P/A" --out "$R/torch-$b.jsonl" --device cuda --blas $b \
    > "$R/torch-$b.txt" 2>&1 || tail -3 "$R/torch-$b.txt" &
done
wait
grep -h "BLAS" "$R"/torch-*.txt
python3 - "$R" <<'PY'
import json, sys, itertools
d = sys.argv[1]
runs = ["ours-A", "ours-B", "torch-default", "torch-cublas", "torch-cublaslt"]
def log(x):
    tr, va = {}, {}
    for r in map(json.loads, open(f"{d}/{x}.jsonl")):
        if r.get("type") == "train": tr[r["step"]] = r["loss"]
        if r.get("type") == "val": va[r["step"]] = r["loss"]
    return tr, va
L = {x: log(x) for x in runs}
print(f"{'pair':32} {'mean|Δtrain| last 200':>22} {'max|Δval| last 200':>19} {'first step apart':>17} {'final val a/b':>16}")
for a, b in itertools.combinations(runs, 2):
    (ta, va), (tb, vb) = L[a], L[b]
    last = max(set(ta) & set(tb)); steps = [s for s in sorted(set(ta) & set(tb)) if s > last - 200]
    mt = sum(abs(ta[s] - tb[s]) for s in steps) / len(steps)
    vs = [s for s in sorted(set(va) & set(vb)) if s > last - 200]
    mv = max(abs(va[s] - vb[s]) for s in vs)
    apart = next((s for s in sorted(set(ta) & set(tb)) if ta[s] != tb[s]), "-")
    print(f"{a + ' - ' + b:32} {mt:22.4f} {mv:19.4f} {str(apart):>17} {va[max(va)]:7.4f}/{vb[max(vb)]:.4f}")
PY
rm -rf "$P"
tar czf "${OUT:-/tmp/out}/call30.tgz" -C "$(dirname "$R")" call30 && rm -rf "$R"
echo "=== end ($(date -u +%T))"

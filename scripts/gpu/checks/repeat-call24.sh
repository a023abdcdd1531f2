#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/repeat-call24.sh`. Results: $OUT/call24.tgz.
# Session 8, call 24 (nvidia-h100-x1), the build of call 23:
# 1. Call 23's repeatability check in bf16 (call 23's bf16 runs filled the disk with
#    checkpoints): `small`, 300 steps; A fresh (times its GEMMs); B fresh with A's table;
#    C fresh, timing anew; D with A's table stopped at 150 and resumed; E and F with
#    MODEL_GEMM_TUNE=0. Compared on every logged loss, norm and validation.
# 2. train-speed at xl bf16 after the GEMM table (bench single; train run single and zero1
#    over NCCL at world 1), no PyTorch.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R="${OUT:-/tmp/out}/call24"; mkdir -p "$R"
echo "=== repeatability, bf16 ($(date -u +%T))"
P=/tmp/rep; rm -rf "$P"; mkdir -p "$P"
bin/train prepare --data "$P/data" > /dev/null 2>&1 || exit 1
dt=bf16
A=(--model small --global-batch 8 --lr 1e-3 --min-lr 1e-4 --warmup 100 --eval-every 100 --steps 300
   --ckpt-every 50 --keep 2 --backend nccl --world 1 --no-progress --bf16)
t() {
  bin/train run --data "$P/data" --out "$P/$dt-$1" "${A[@]}" "${@:2}" > "$R/$dt-$1.txt" 2>&1 || tail -2 "$R/$dt-$1.txt"
}
t A; (t C) & (MODEL_GEMM_TUNE=0 t E) & (MODEL_GEMM_TUNE=0 t F) &
t B --gemm-choices "$P/$dt-A/gemm-choices.json"
t D --gemm-choices "$P/$dt-A/gemm-choices.json" --stop-after 150; t D
wait
for x in A B C D E F; do cp "$P/$dt-$x/log.jsonl" "$R/$dt-$x.jsonl"; cp "$P/$dt-$x/gemm-choices.json" "$R/$dt-$x-gemm.json"; done
grep -h "GEMM algorithms\|warning" "$R/$dt-B.txt" "$R/$dt-D.txt" | sort | uniq -c
df -h /tmp | tail -1
python3 - "$R" <<'PY'
import json, sys
d = sys.argv[1]
def recs(f):
    return [(r["type"], r["step"], r.get("loss"), r.get("grad_norm"))
            for r in map(json.loads, open(f)) if r["type"] in ("train", "val")]
def idx(x):
    return [c["index"] for c in json.load(open(f"{d}/bf16-{x}-gemm.json"))["choices"]]
print("tables:", {x: idx(x) for x in "ACE"}, "B = A:", idx("B") == idx("A"), "D = A:", idx("D") == idx("A"))
print(f"{'dtype':5} {'pair':22} {'records':>7} {'equal':>6} {'first apart':>12} {'final val a/b':>17}")
for a, b, what in [("A", "B", "B: A's table"), ("A", "C", "C: timed anew"),
                   ("A", "D", "D: A's table, resumed"), ("E", "F", "E/F: no timing"), ("A", "E", "E: first heuristic")]:
    ra, rb = recs(f"{d}/bf16-{a}.jsonl"), recs(f"{d}/bf16-{b}.jsonl")
    apart = next((x[0] + " " + str(x[1]) for x, y in zip(ra, rb) if x != y), "-")
    va = [x[2] for x in ra if x[0] == "val"][-1]; vb = [x[2] for x in rb if x[0] == "val"][-1]
    print(f"bf16  {a}-{what:20} {len(ra):4}/{len(rb):<4} {str(ra == rb):>6} {apart:>12} {va:8.5f}/{vb:8.5f}")
PY
rm -rf "$P"
echo "=== train-speed xl bf16 ($(date -u +%T))"
OUT="$R" CASES="xl:bf16" TS_STRATEGIES="single zero1" TS_TORCH=" " bash run.sh train-speed 2>&1 | grep -E "^(size|xl) |rror"
tar czf "${OUT:-/tmp/out}/call24.tgz" -C "$(dirname "$R")" call24 && rm -rf "$R"
echo "=== end ($(date -u +%T))"

#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/seeds-call22.sh`.
# Session 8, call 22 (nvidia-h100-x1):
# 1. `bench zero1 --dtype bf16` at NCCL world 1 beside `bench single` bf16 (issue 33's
#    1.03 bar for bench zero1 had been measured in fp32 only).
# 2. fp32 parity over seeds and repeats: is a 0.02 gap in the last 200 steps a difference
#    in the math, or where two runs land? `small`, 2,000 steps, train-parity's flags; ours
#    (`train run`) and the PyTorch trainer (anchors/torch_train.py) from the same weights:
#    seeds 0 (train-parity's), 1 and 2, and seed 0 twice more (ours again from scratch,
#    torch again from the same weights). The runs share the GPU (timings are not the point).
#    Then `train compare --last 200` on every pair: ours-torch per seed, ours-ours and
#    torch-torch for seed 0.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R="${OUT:-/tmp/out}"; mkdir -p "$R"
echo "=== bench single + bench zero1, xl bf16, NCCL world 1 ($(date -u +%T))"
bin/bench single --size xl --dtype bf16 --mode step --out "$R/results.jsonl" | tail -2
bin/bench zero1 --backend nccl --ranks 1 --size xl --dtype bf16 --bucket-mb 1 \
  --modes ddp,zero1-overlap,zero1-ahead --out "$R/results.jsonl" | tail -4
echo "=== fp32 parity over seeds ($(date -u +%T))"
P=/tmp/par; rm -rf "$P"; mkdir -p "$P" "$R/seeds"
bin/train prepare --data "$P/data" > "$P/prepare.txt" 2>&1 || { tail -3 "$P/prepare.txt"; exit 1; }
ARGS=(--model small --global-batch 8 --lr 1e-3 --min-lr 1e-4 --warmup 100 --eval-every 100
      --steps 2000 --ckpt-every 2000 --keep 1 --strategy single --backend nccl --world 1
      --fresh --no-progress)
ours() { # seed name [--export-init]
  bin/train run --data "$P/data" --out "$P/$2" --seed "$1" "${ARGS[@]}" ${3:-} > "$R/seeds/$2.txt" 2>&1 \
    && cp "$P/$2/log.jsonl" "$R/seeds/$2.jsonl" && rm -rf "$P/$2/checkpoints"
}
torch() { # run-dir name
  python3 anchors/torch_train.py --data "$P/data" --run "$P/$1" --out "$R/seeds/$2.jsonl" \
    --device cuda > "$R/seeds/$2.txt" 2>&1
}
(ours 0 o0 --export-init && { torch o0 t0 & torch o0 t0b; wait; }) &
(ours 0 o0b) &
(ours 1 o1 --export-init && torch o1 t1) &
(ours 2 o2 --export-init && torch o2 t2) &
wait
echo "=== runs done ($(date -u +%T))"
for pair in o0:t0 o1:t1 o2:t2 o0b:t0b o0:o0b t0:t0b o0b:t0 o0:t0b; do
  a="${pair%%:*}"; b="${pair##*:}"; d="$R/seeds/$a-$b"; mkdir -p "$d"
  bin/train compare "$R/seeds/$a.jsonl" "$R/seeds/$b.jsonl" --out "$d" --last 200 > "$d/out.txt" 2>&1 \
    || tail -2 "$d/out.txt"
done
python3 - "$R/seeds" <<'PY'
import json, os, sys
d = sys.argv[1]
print(f"{'pair':9} {'a val':>7} {'b val':>7} {'mean|Δtrain|200':>15} {'max|Δval|200':>12} {'first step apart':>16}")
for pair in ["o0:t0", "o1:t1", "o2:t2", "o0b:t0b", "o0b:t0", "o0:t0b", "o0:o0b", "t0:t0b"]:
    a, b = pair.split(":")
    try:
        c = json.load(open(os.path.join(d, f"{a}-{b}", "compare.json")))
    except OSError:
        print(f"{pair:9} (no comparison)"); continue
    la = [json.loads(l) for l in open(os.path.join(d, a + ".jsonl"))]
    lb = [json.loads(l) for l in open(os.path.join(d, b + ".jsonl"))]
    ta = {r["step"]: r["loss"] for r in la if r["type"] == "train"}
    tb = {r["step"]: r["loss"] for r in lb if r["type"] == "train"}
    apart = next((s for s in sorted(ta) if s in tb and ta[s] != tb[s]), "-")
    vals = [v for v in c["val"] if v["step"] > c["common_steps"] - c["last"]]
    mv = max((v["abs_diff"] for v in vals), default=float("nan"))
    print(f"{pair:9} {c['a']['final_val_loss']:7.4f} {c['b']['final_val_loss']:7.4f} "
          f"{c['mean_abs_train_last']:15.4f} {mv:12.4f} {apart!s:>16}")
PY
rm -rf "$P"
echo "=== end ($(date -u +%T))"

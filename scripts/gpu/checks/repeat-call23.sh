#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/repeat-call23.sh`. Results: $OUT/call23.tgz (the device tool returns few files).
# Session 8, call 23 (nvidia-h100-x1):
# 1. `bench zero1 --dtype bf16` as `train --strategy zero1` sends gradients (bf16, 25 MB
#    buckets, coalesced), beside `bench single` bf16, xl.
# 2. Repeatability with the run's GEMM table (gemm-choices.json), `small`, 300 steps, fp32
#    and bf16: A fresh (times its GEMMs); B fresh with A's table (= A?); C fresh, timing anew
#    (= A?); D with A's table stopped at 150 and resumed (= A?); E and F with
#    MODEL_GEMM_TUNE=0 (= each other?). Compared on every logged loss, norm and validation.
# 3. fp32 parity, seeds 3 and 4 (ours and torch_train.py, 2000 steps, train-parity's flags).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R="${OUT:-/tmp/out}/call23"; mkdir -p "$R"
echo "machine: $(pwd) uid $(id -u), $(nproc) cores, $(df -h / | tail -1 | awk '{print $4}') free"
echo "=== bench single + bench zero1 (bf16 gradients, 25 MB coalesced), xl bf16 ($(date -u +%T))"
bin/bench single --size xl --dtype bf16 --mode step --out "$R/results.jsonl" | tail -1
bin/bench zero1 --backend nccl --ranks 1 --size xl --dtype bf16 --bucket-mb 25 --coalesce \
  --modes ddp,zero1-overlap,zero1-ahead --out "$R/results.jsonl" | tail -4
bin/bench zero1 --backend nccl --ranks 1 --size xl --dtype bf16 --bucket-mb 25 \
  --modes zero1-ahead --out "$R/results.jsonl" | tail -1
echo "=== repeatability ($(date -u +%T))"
P=/tmp/rep; rm -rf "$P"; mkdir -p "$P"
bin/train prepare --data "$P/data" > /dev/null 2>&1 || exit 1
for dt in fp32 bf16; do
  A=(--model small --global-batch 8 --lr 1e-3 --min-lr 1e-4 --warmup 100 --eval-every 100 --steps 300
     --ckpt-every 50 --keep 10 --backend nccl --world 1 --no-progress $([ $dt = bf16 ] && echo --bf16))
  t() { bin/train run --data "$P/data" --out "$P/$dt-$1" "${A[@]}" "${@:2}" > "$R/$dt-$1.txt" 2>&1; }
  t A; (t C) & (MODEL_GEMM_TUNE=0 t E) & (MODEL_GEMM_TUNE=0 t F) &
  t B --gemm-choices "$P/$dt-A/gemm-choices.json"
  t D --gemm-choices "$P/$dt-A/gemm-choices.json" --stop-after 150; t D
  wait
  for x in A B C D E F; do cp "$P/$dt-$x/log.jsonl" "$R/$dt-$x.jsonl"; done
  cp "$P/$dt-A/gemm-choices.json" "$R/$dt-gemm-choices.json"
  grep -h "GEMM algorithms\|warning" "$R/$dt-B.txt" "$R/$dt-D.txt" | sort | uniq -c
done
python3 - "$R" <<'PY'
import json, sys
d = sys.argv[1]
def recs(f):
    return [(r["type"], r["step"], r.get("loss"), r.get("grad_norm"))
            for r in map(json.loads, open(f)) if r["type"] in ("train", "val")]
print(f"{'dtype':5} {'pair':22} {'records':>7} {'equal':>6} {'first apart':>12} {'final val a/b':>17}")
for dt in ("fp32", "bf16"):
    for a, b, what in [("A", "B", "B: A's table"), ("A", "C", "C: timed anew"),
                       ("A", "D", "D: A's table, resumed"), ("E", "F", "E/F: no timing")]:
        ra, rb = recs(f"{d}/{dt}-{a}.jsonl"), recs(f"{d}/{dt}-{b}.jsonl")
        apart = next((x[0] + " " + str(x[1]) for x, y in zip(ra, rb) if x != y), "-")
        va = [x[2] for x in ra if x[0] == "val"][-1]; vb = [x[2] for x in rb if x[0] == "val"][-1]
        print(f"{dt:5} {a}-{what:20} {len(ra):7} {str(ra == rb):>6} {apart:>12} {va:8.5f}/{vb:8.5f}")
PY
rm -rf "$P"
echo "=== fp32 parity, seeds 3 and 4 ($(date -u +%T))"
P=/tmp/par; rm -rf "$P"; mkdir -p "$P"
bin/train prepare --data "$P/data" > /dev/null 2>&1 || exit 1
ARGS=(--model small --global-batch 8 --lr 1e-3 --min-lr 1e-4 --warmup 100 --eval-every 100
      --steps 2000 --ckpt-every 2000 --keep 1 --strategy single --backend nccl --world 1
      --fresh --no-progress --export-init)
for s in 3 4; do
  (bin/train run --data "$P/data" --out "$P/o$s" --seed $s "${ARGS[@]}" > "$R/o$s.txt" 2>&1 \
    && cp "$P/o$s/log.jsonl" "$R/o$s.jsonl" && rm -rf "$P/o$s/checkpoints" \
    && python3 anchors/torch_train.py --data "$P/data" --run "$P/o$s" --out "$R/t$s.jsonl" \
         --device cuda > "$R/t$s.txt" 2>&1 \
    && bin/train compare "$R/o$s.jsonl" "$R/t$s.jsonl" --out "$R/o$s-t$s" --last 200 > /dev/null 2>&1) &
done
wait
python3 - "$R" <<'PY'
import json, os, sys
d = sys.argv[1]
for s in (3, 4):
    try:
        c = json.load(open(os.path.join(d, f"o{s}-t{s}", "compare.json")))
    except OSError:
        print(f"seed {s}: no comparison"); continue
    vals = [v for v in c["val"] if v["step"] > c["common_steps"] - c["last"]]
    print(f"seed {s}: final val ours {c['a']['final_val_loss']:.4f} torch {c['b']['final_val_loss']:.4f}, "
          f"mean|Δtrain|200 {c['mean_abs_train_last']:.4f}, max|Δval|200 {max(v['abs_diff'] for v in vals):.4f}")
PY
rm -rf "$P"
tar czf "${OUT:-/tmp/out}/call23.tgz" -C "$(dirname "$R")" call23 && rm -rf "$R"
echo "=== end ($(date -u +%T))"

#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/gather-call62.sh`. Results: $OUT/call62.tgz.
# Session 13, call 62 (nvidia-h100-x2), xl bf16, batch 8 x 128 per GPU. The change it measured
# was slower and is reverted (docs/results/train-speed-x2.md); this script is its record.
# ZeRO-1's captured step now gathers every bucket at its head (each forward stage waiting
# for its own) instead of collecting the all-gathers at its end (calls 58-60: zero1 at
# world 2 11.1 ms over bucketed:25). Expected: most of that 11 ms hidden behind the
# forward; the losses unchanged bit for bit (zero1's step-40 loss was 3.408696413040161 in
# calls 58-61, on both kinds). Then bench model-check (graph = eager at world 1).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
C="${CALL:-call62}"; R="${OUT:-/tmp/out}/$C"; mkdir -p "$R"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$R/gpu.txt"
D=/tmp/d62; bin/train prepare --data "$D" > /dev/null 2>&1
timeout 60 bin/train run --data "$D" --out /tmp/r-table --model xl --bf16 --global-batch 8 --steps 100000 --stop-after 8 \
  --eval-every 100000 --ckpt-every 100000 --strategy single --backend nccl --world 1 --fresh --no-progress > "$R/table.txt" 2>&1 || tail -3 "$R/table.txt"
T="$R/gemm-xl-bf16.json"; cp /tmp/r-table/gemm-choices.json "$T"; rm -rf /tmp/r-table
run2() { # strategy
  local n="${1%%:*}"; rm -rf "/tmp/r-$n"
  timeout 60 bin/comm-launch --nproc-per-node 2 -- bin/train run --data "$D" --out "/tmp/r-$n" --model xl --bf16 --global-batch 16 \
    --steps 100000 --stop-after 40 --eval-every 20 --eval-batches 2 --ckpt-every 100000 --strategy "$1" --backend nccl --fresh \
    --no-progress --gemm-choices "$T" > "$R/$n.txt" 2>&1 || { tail -3 "$R/$n.txt"; return; }
  cp "/tmp/r-$n/log.jsonl" "$R/$n.jsonl"
  python3 - "/tmp/r-$n/log.jsonl" "$1" "$R/$n.txt" <<'PY' | tee -a "$R/world2.jsonl"
import json, statistics, sys
recs = list(map(json.loads, open(sys.argv[1])))
t = [r for r in recs if r.get("type") == "train"]
v = [(r["step"], r["loss"]) for r in recs if r.get("type") == "val"]
tps = statistics.median(r["tokens_per_s"] for r in t if r["step"] >= 6 and r["step"] not in (20, 21, 40))
how = [l.split("train: step: ")[1].strip() for l in open(sys.argv[3]) if "train: step: " in l]
print(json.dumps({"strategy": sys.argv[2], "world": 2, "step_ms": round(16 * 128 / tps * 1e3, 3),
                  "loss_40": t[-1]["loss"], "val": v, "how": how[0] if how else None}))
PY
  rm -rf "/tmp/r-$n"
}
run2 zero1
run2 bucketed:25
timeout 40 bin/bench single --size xl --dtype bf16 --mode step --vocab 683 --warmup 5 --steps 35 --gemm-choices "$T" \
  --out "$R/single.jsonl" > /dev/null 2>&1; python3 -c "import json,sys; r=json.loads(open(sys.argv[1]).readlines()[-1]); print('bench single', r['step_median_ms'])" "$R/single.jsonl"
timeout 40 bin/bench model-check > "$R/model-check.txt" 2>&1; echo "model-check rc $?"; grep -c ": OK" "$R/model-check.txt"; grep -v ": OK" "$R/model-check.txt" | grep -i "zero1\|fail" | head -3
rm -rf "$D"
tar czf "${OUT:-/tmp/out}/$C.tgz" -C "$(dirname "$R")" "$C" && rm -rf "$R"
echo "=== end ($(date -u +%T))"

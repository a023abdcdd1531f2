#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/world2-call72.sh`. Results: $OUT/call72/ (the train-speed folder as one tgz).
# Session 15, call 72 (nvidia-h100-x2), xl bf16, 8 x 128 per GPU, clipping at 1.0: the product
# as a user runs it after calls 67-71: `--strategy zero1` now buckets 200 MB (call 71: 48.61
# ms against 54.55 with 25 MB), beside bench single --clip 1 and PyTorch's DDP trainer
# (compile-ro) at world 2, all in this call; DDP with 200 MB buckets too; then zero1 with
# NCCL_MIN_CTAS=32 (call 71: 47.44 ms), which the product does not set.
# Expected: zero1 about 1.02x one GPU, about 0.99x with NCCL_MIN_CTAS=32.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
C="${CALL:-call72}"; R="${OUT:-/tmp/out}/$C"; mkdir -p "$R"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$R/gpu.txt"
OUT="$R" CASES="xl:bf16" TS_WORLDS=2 TS_STRATEGIES="zero1 bucketed:25 bucketed:200" TS_ACCUM=1 TS_TORCH=compile-ro TS_STEPS=30 \
  bash ./run.sh train-speed > "$R/train-speed.txt" 2>&1
grep -E "^--- |^size|^xl|ours|torch" "$R/train-speed.txt" | tail -20
echo "=== zero1 with NCCL_MIN_CTAS=32 ($(date -u +%T))"
D="$R/train-speed/data"; T="$R/train-speed/gemm-xl-bf16.json"; rm -rf /tmp/r-z
NCCL_MIN_CTAS=32 timeout 240 bin/comm-launch --nproc-per-node 2 -- bin/train run --data "$D" --out /tmp/r-z --model xl --bf16 \
  --global-batch 16 --steps 100000 --stop-after 30 --eval-every 100000 --ckpt-every 100000 --strategy zero1 --backend nccl \
  --fresh --no-progress --gemm-choices "$T" > "$R/zero1-ctas32.txt" 2>&1 || tail -3 "$R/zero1-ctas32.txt"
python3 - /tmp/r-z/log.jsonl <<'PY' | tee "$R/zero1-ctas32.jsonl"
import json, statistics, sys
t = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l]
tps = statistics.median(r["tokens_per_s"] for r in t if r["step"] >= 6)
print(json.dumps({"bench": "train", "strategy": "zero1", "world": 2, "env": "NCCL_MIN_CTAS=32", "step_ms": round(16 * 128 / tps * 1e3, 3)}))
PY
rm -rf "$D" /tmp/r-z
tar czf "$R/train-speed.tgz" -C "$R" train-speed && rm -rf "$R/train-speed"
ls "$R"
echo "=== end ($(date -u +%T))"

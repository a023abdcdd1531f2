#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/world2-call65.sh`. Results: $OUT/call65/.
# Session 14, call 65 (nvidia-h100-x2; the 4-GPU kinds were not lent), xl bf16, 8 x 128 per
# GPU and micro-batch. Since call 63: ZeRO-1 gathers each bucket as one NCCL group
# (all_gather_coalesced: about 48 launches a step instead of one per parameter); DDP and
# ZeRO-1 fold 1/k into the last sum. Expected: zero1 at world 2 a few ms under call 63's
# 56.29 (the per-launch cost of ~340 small all-gathers), bucketed:25 as before (56.63);
# --accum 4 keeping (or bettering) world 1's ratio to --accum 1 (3.19 in call 64). Beside:
# bench single (one GPU) and PyTorch's DDP trainer (compile-ro) at world 2, and where the
# time goes without clipping (--clip 0).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
C="${CALL:-call65}"; R="${OUT:-/tmp/out}/$C"; mkdir -p "$R"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$R/gpu.txt"
OUT="$R" CASES="xl:bf16" TS_WORLDS=2 TS_STRATEGIES="bucketed:25 zero1" TS_ACCUM="1 4" TS_TORCH=compile-ro TS_TORCH_ACCUM=1 TS_STEPS=30 \
  bash ./run.sh train-speed > "$R/train-speed.txt" 2>&1
grep -E "^--- |^size|^xl|accum bar" "$R/train-speed.txt" | tail -20
echo "=== without clipping ($(date -u +%T))"
D=/tmp/d65; bin/train prepare --data "$D" > /dev/null 2>&1
T="$R/train-speed/gemm-xl-bf16.json"
for st in bucketed:25 zero1; do
  n="${st%%:*}"; rm -rf "/tmp/r-$n"
  timeout 90 bin/comm-launch --nproc-per-node 2 -- bin/train run --data "$D" --out "/tmp/r-$n" --model xl --bf16 --global-batch 16 \
    --steps 100000 --stop-after 30 --eval-every 100000 --ckpt-every 100000 --strategy "$st" --backend nccl --fresh --clip 0 \
    --no-progress --gemm-choices "$T" > "$R/noclip-$n.txt" 2>&1 || { tail -3 "$R/noclip-$n.txt"; continue; }
  python3 - "/tmp/r-$n/log.jsonl" "$st" <<'PY' | tee -a "$R/noclip.jsonl"
import json, statistics, sys
t = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l]
tps = statistics.median(r["tokens_per_s"] for r in t if r["step"] >= 6)
print(json.dumps({"strategy": sys.argv[2], "world": 2, "clip": 0, "step_ms": round(16 * 128 / tps * 1e3, 3)}))
PY
  rm -rf "/tmp/r-$n"
done
rm -rf "$D" "$R/train-speed/data"
echo "=== end ($(date -u +%T))"

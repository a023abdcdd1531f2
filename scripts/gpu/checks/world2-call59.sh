#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/world2-call59.sh`. Results: $OUT/call59.tgz.
# Session 13, call 59 (nvidia-h100-x2 asked for; the reply names the kind), xl bf16,
# batch 8 x 128 per GPU. Call 58 found `train run` at world 2 1.23x (bucketed:25) and
# 1.47x (zero1) one GPU's step, and torch_train_best's compile-ro DDP at 155 ms.
# 1. run.sh train-speed, TS_WORLDS="1 2", no PyTorch: ours again, and the GEMM table.
# 2. Where world 2's time goes, each a `train run` at world 2 on that table: no clipping
#    (AdamW inside the backward, bucket by bucket), buckets of 5 and 100 MB, and
#    NCCL_CTA_POLICY=1; the all-reduce alone (bench allreduce, 25 MiB and 1 GiB).
# 3. torch_train_best.py's `compile` variant (torch.compile without CUDA graphs) as DDP at
#    world 2 under torchrun, then at world 1.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
C="${CALL:-call59}"; R="${OUT:-/tmp/out}/$C"; mkdir -p "$R"
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,memory.total --format=csv,noheader | tee "$R/gpu.txt"
OUT="$R" CASES="xl:bf16" TS_WORLDS="1 2" TS_STRATEGIES="single bucketed:25 zero1" TS_TORCH=" " \
  timeout 200 bash run.sh train-speed 2>&1 | tee "$R/train-speed.txt" | grep -E "^(size|xl|small) |rror|---"
T="$R/train-speed/gemm-xl-bf16.json"; D=/tmp/d59
bin/train prepare --data "$D" > /dev/null 2>&1
echo "=== world 2, where the time goes ($(date -u +%T))"
diag() { # name strategy [env=value ...] -- [train flags ...]
  local name="$1" st="$2" envs=(); shift 2
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  rm -rf "/tmp/r-$name"
  timeout 70 env "${envs[@]}" bin/comm-launch --nproc-per-node 2 -- bin/train run --data "$D" --out "/tmp/r-$name" --model xl --bf16 \
    --global-batch 16 --steps 100000 --stop-after 40 --eval-every 100000 --ckpt-every 100000 --strategy "$st" \
    --backend nccl --fresh --no-progress --gemm-choices "$T" "$@" > "$R/diag-$name.txt" 2>&1 || { tail -3 "$R/diag-$name.txt"; return; }
  cp "/tmp/r-$name/log.jsonl" "$R/diag-$name.jsonl"
  python3 - "/tmp/r-$name/log.jsonl" "$name" "$R/diag-$name.txt" <<'PY' | tee -a "$R/diag.jsonl"
import json, statistics, sys
t = [r for r in map(json.loads, open(sys.argv[1])) if r.get("type") == "train"]
tps = statistics.median(r["tokens_per_s"] for r in t if r["step"] >= 6)
how = [l.split("train: step: ")[1].strip() for l in open(sys.argv[3]) if "train: step: " in l]
print(json.dumps({"diag": sys.argv[2], "world": 2, "step_ms": 16 * 128 / tps * 1e3, "steps": len(t), "how": how[0] if how else None}))
PY
  rm -rf "/tmp/r-$name"
}
diag noclip bucketed:25 NCCL_DEBUG=WARN -- --clip 0
diag b5 bucketed:5 NCCL_DEBUG=WARN --
diag b100 bucketed:100 NCCL_DEBUG=WARN --
diag cta1 bucketed:25 NCCL_CTA_POLICY=1 --
echo "=== all-reduce alone ($(date -u +%T))"
timeout 60 bin/bench allreduce --backend nccl --ranks 2 --sizes-mib 25,1024 --iters 10 --out "$R/allreduce.jsonl" 2>&1 | tail -4
echo "=== torch_train_best compile ($(date -u +%T))"
timeout 170 python3 -m torch.distributed.run --standalone --nproc_per_node 2 anchors/torch_train_best.py "$D" xl --dtype bf16 \
  --variant compile --global-batch 16 --steps 60 2> "$R/torch-compile-w2.err" | grep '^{' | tee -a "$R/torch.jsonl"
timeout 130 python3 anchors/torch_train_best.py "$D" xl --dtype bf16 --variant compile --global-batch 8 --steps 60 \
  2> "$R/torch-compile-w1.err" | grep '^{' | tee -a "$R/torch.jsonl"
rm -rf "$R/train-speed/data" "$D"
tar czf "${OUT:-/tmp/out}/$C.tgz" -C "$(dirname "$R")" "$C" && rm -rf "$R"
echo "=== end ($(date -u +%T))"

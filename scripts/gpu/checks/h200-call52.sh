#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/h200-call52.sh`. Results: $OUT/call52.tgz.
# Session 12, call 52 (asked for nvidia-h200; the card is printed first), the rest of issue
# 33's bars on that kind after call 51 (small and xl bf16):
# 1. train-speed at xl fp32 (single, bucketed:25, zero1, bench single with and without
#    clipping; no PyTorch: the fp32 bar is against bench single);
# 2. xl bf16 twice more, train run single and bench single (call 51's 1.037 was one run);
# 3. xl bf16 clipping's cost split: bench single plain, STEP_ADAMW=after, --clip 1 (one GEMM
#    table), and the norm's pass alone (bench gradnorm);
# 4. bench ddp and bench zero1 at NCCL world 1, xl bf16, each with bench single's step as
#    its own 1-GPU column.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R="${OUT:-/tmp/out}/call52"; mkdir -p "$R"
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,memory.total --format=csv,noheader | tee "$R/gpu.txt"
echo "=== (1) xl fp32 ($(date -u +%T))"
mkdir -p "$R/fp32"
OUT="$R/fp32" CASES="xl:fp32" TS_STRATEGIES="single bucketed:25 zero1" TS_TORCH=" " \
  timeout 200 bash run.sh train-speed 2>&1 | grep -E "^(size|xl|small) |rror|---"
for i in 1 2; do
  echo "=== (2) xl bf16 round $i ($(date -u +%T))"
  mkdir -p "$R/bf16-$i"
  OUT="$R/bf16-$i" CASES="xl:bf16" TS_STRATEGIES="single" TS_TORCH=" " \
    timeout 120 bash run.sh train-speed 2>&1 | grep -E "^(size|xl|small) |rror"
done
echo "=== (3) split ($(date -u +%T))"
T=(--gemm-choices "$R/bf16-2/train-speed/gemm-xl-bf16.json")
V=683
timeout 60 bin/bench single --size xl --dtype bf16 --mode step --vocab $V "${T[@]}" --out "$R/split.jsonl" | tail -1
STEP_ADAMW=after timeout 60 bin/bench single --size xl --dtype bf16 --mode step --vocab $V "${T[@]}" --out "$R/split.jsonl" | tail -1
timeout 60 bin/bench single --size xl --dtype bf16 --mode step --vocab $V "${T[@]}" --clip 1 --out "$R/split.jsonl" | tail -1
timeout 60 bin/bench gradnorm --size xl --dtype bf16 --iters 50 --out "$R/gradnorm.jsonl" | tail -2
echo "=== (4) bench ddp / zero1, NCCL world 1 ($(date -u +%T))"
timeout 120 bin/bench ddp --backend nccl --ranks 1 --size xl --dtype bf16 --strategies bucketed --buckets-mb 25 \
  --coalesce true --out "$R/bench.jsonl" 2>&1 | tail -4
timeout 120 bin/bench zero1 --backend nccl --ranks 1 --size xl --dtype bf16 --modes ddp,zero1-ahead --bucket-mb 25 \
  --coalesce --out "$R/bench.jsonl" 2>&1 | tail -3
tar czf "${OUT:-/tmp/out}/call52.tgz" -C "$(dirname "$R")" call52 && rm -rf "$R"
echo "=== end ($(date -u +%T))"

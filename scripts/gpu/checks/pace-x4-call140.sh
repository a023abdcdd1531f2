#!/usr/bin/env bash
# Call 140 (session 26), FOUR GPUs: does each GPU of the machine step at the same pace?
# A world-N step goes at its slowest rank's pace, while `bench single` runs on GPU 0 alone.
# bench single --clip 1, xl bf16, on every GPU at once (independent processes, no
# communicator), at 8 and 32 rows, with calls 137 and 138's GEMM tables (gemm-b8.json,
# gemm-b32.json copied beside this script).
export NCCL_NVLS_ENABLE=0
H="$(cd "$(dirname "$0")" && pwd)"
for z in "$H"/bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
O="${OUT:-/tmp/out}"; mkdir -p "$O"
for b in 8 32; do
  for g in 0 1 2 3; do
    CUDA_VISIBLE_DEVICES=$g "$H/bin/bench" single --size xl --dtype bf16 --mode step --batch $b --vocab 683 \
      --warmup 5 --steps 35 --clip 1 --gemm-choices "$H/gemm-b$b.json" --out "$O/pace.jsonl" > "$O/pace-b$b-g$g.txt" 2>&1 &
  done
  wait
  for g in 0 1 2 3; do echo "b$b gpu$g: $(tail -1 "$O/pace-b$b-g$g.txt" | cut -c1-160)"; done
done
nvidia-smi --query-gpu=index,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv

#!/usr/bin/env bash
# Call 148 (session 27), FOUR GPUs, from the packed folder (copy this and train-runs.sh into
# .gpu/); about 3 minutes. Issue 47's 8-row bars at this code (zero1's gathers beside AdamW
# by default) on whichever 4-GPU kind comes: the bars were set on nvidia-h100-x4, where
# AdamW is a larger share of the step than on an H200 (19.96 of 47.96 ms against 14.68 of
# 41.55), so ZeRO-1 should save more there.
CALL=call148
source "$(dirname "$0")/train-runs.sh"
export TMO=80
xl single 1 single
bin/bench single --size xl --dtype bf16 --mode step --batch 8 --vocab "$vocab" --warmup 5 --steps 15 \
  --gemm-choices "$R/gemm-xl.json" --clip 1 --out "$R/results.jsonl" > "$R/bench-single.txt" 2>&1 && tail -1 "$R/bench-single.txt" | cut -c1-120
for w in 2 4; do
  xl zero1-w$w $w zero1
  xl bucketed-w$w $w bucketed:25
done
pack

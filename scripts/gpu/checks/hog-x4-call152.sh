#!/usr/bin/env bash
# Call 152 (session 28), FOUR GPUs, from the packed folder (copy this and train-runs.sh into
# .gpu/); about 8 minutes. The one 4-GPU call of the session:
# 1. The backward's GEMMs run 30-160 % longer beside NCCL's kernels (call 150's trace:
#    128x128 tiles in 2x4 clusters 67.8 us against 26.2 alone; a cooperative 320x128 kernel
#    60.8 against 33.0). The GEMM table is tuned on an idle GPU. Tuned beside a stand-in for
#    NCCL (MODEL_GEMM_TUNE_BESIDE=24: 24 CTAs holding SMs and streaming memory,
#    model::gemm::beside), does it choose kernels that lose less, and what do they cost
#    alone? Three tables: plain, hog (every shape tuned beside the stand-in), mixed (the hog's
#    choice for the backward's shapes, the plain one for the forward's: ta = false, tb = true).
# 2. Split DDP (DDP_SPLIT=1) against bucketed:25 at world 4.
# 3. Issue 47's 8-row bars, x bench single --clip 1, and PyTorch DDP compile-ro at world 4.
# As run, the two tuning runs and the tables' python were inline here; they are
# train-runs.sh's `tables` now, the same commands. MODEL_GEMM_TUNE_BESIDE was removed after call 153 (its code: commit 4b8b83b).
CALL=call152
source "$(dirname "$0")/train-runs.sh"
export TMO=100
tables
export TMO=60
cp "$R/gemm-plain.json" "$R/gemm-xl.json"
bin/bench single --size xl --dtype bf16 --mode step --batch 8 --vocab "$vocab" --warmup 5 --steps 15 \
  --gemm-choices "$R/gemm-xl.json" --clip 1 --out "$R/results.jsonl" > "$R/bench-single.txt" 2>&1 && tail -1 "$R/bench-single.txt" | cut -c1-120
for t in plain hog mixed; do
  cp "$R/gemm-$t.json" "$R/gemm-xl.json"
  xl single-$t 1 single
  xl zero1-w4-$t 4 zero1
  xl bucketed-w4-$t 4 bucketed:25
  xl zero1-w2-$t 2 zero1
done
cp "$R/gemm-plain.json" "$R/gemm-xl.json"
xl bucketed-w2-plain 2 bucketed:25
xl split-w4 4 bucketed:25 DDP_SPLIT=1
TTMO=150 torch xl compile-ro 40 ddp 4
pack

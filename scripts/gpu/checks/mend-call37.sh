#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/mend-call37.sh`. Results: printed only.
# Session 9, call 37 (nvidia-h100-x1), after the review mend (model::gemm::Table::apply_file
# now reads, checks and takes a table for both train and bench single): bench single
# --save-gemm-choices then --gemm-choices (small bf16); train run --gemm-choices with that
# table, and with a table for another GPU (refused); bench gradnorm small bf16.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
T=/tmp/mend; rm -rf "$T"; mkdir -p "$T"
bin/bench single --size small --dtype bf16 --mode step --steps 3 --save-gemm-choices "$T/t.json" --out "$T/r.jsonl" > /dev/null 2>&1; echo "save rc $?"
bin/bench single --size small --dtype bf16 --mode step --steps 3 --gemm-choices "$T/t.json" --out "$T/r.jsonl" 2>&1 | grep -E "GEMM algorithms|rror"
bin/train prepare --data "$T/data" > /dev/null 2>&1
bin/train run --data "$T/data" --out "$T/run" --model small --bf16 --steps 3 --eval-every 100 --ckpt-every 100 \
  --backend nccl --world 1 --no-progress --gemm-choices "$T/t.json" 2>&1 | grep -E "GEMM|rror" | head -3
sed 's/"identity": "[^"]*"/"identity": "another GPU"/' "$T/t.json" > "$T/other.json"
bin/train run --data "$T/data" --out "$T/run2" --model small --bf16 --steps 3 --backend nccl --world 1 \
  --no-progress --gemm-choices "$T/other.json" 2>&1 | tail -1
bin/bench single --size small --dtype bf16 --mode step --steps 3 --gemm-choices "$T/other.json" --out "$T/r.jsonl" 2>&1 | tail -1
bin/bench gradnorm --size small --dtype bf16 --iters 20 --out "$T/g.jsonl"
rm -rf "$T"

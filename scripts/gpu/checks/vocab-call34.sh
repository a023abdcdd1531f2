#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/vocab-call34.sh`. Results: $OUT/call34.tgz.
# Session 9, call 34 (nvidia-h100-x1): call 31's xl bf16 train-speed again (bench single on
# train's 683-token model; train run single, bucketed:25, zero1), and bench single on the
# size's 10,000-token model in the same call: the vocabulary's share of the old ratios.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R="${OUT:-/tmp/out}/call34"; mkdir -p "$R"
bin/bench single --size xl --dtype bf16 --mode step --out "$R/results.jsonl" | tail -1
OUT="$R" CASES="xl:bf16" TS_STRATEGIES="single bucketed:25 zero1" TS_TORCH=" " \
  bash run.sh train-speed 2>&1 | grep -E "^(size|xl) |rror"
bin/bench single --size xl --dtype bf16 --mode step --out "$R/results.jsonl" | tail -1
tar czf "${OUT:-/tmp/out}/call34.tgz" -C "$(dirname "$R")" call34 && rm -rf "$R"
echo "=== end ($(date -u +%T))"

#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/parity-call28.sh`. Results: $OUT/call28.tgz.
# Session 9, call 28 (nvidia-h100-x1), the build of call 27 (the flat gradient-norm kernel):
# 1. bench model-check: both norm layouts against the host (f32, bf16, mixed; views at
#    unaligned offsets), the graph against eager steps.
# 2. train-parity, fp32 and bf16: the norm's sums now run in another order, so the
#    clipping coefficient rounds differently from session 8's runs.
# 3. train-speed small bf16 and xl fp32 (train run single; no PyTorch).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R="${OUT:-/tmp/out}/call28"; mkdir -p "$R"
echo "=== model-check ($(date -u +%T))"
bin/bench model-check > "$R/model-check.txt" 2>&1; echo "rc $?"; grep -i -E "norm|graph|fail|error" "$R/model-check.txt" | head -12
echo "=== train-parity ($(date -u +%T))"
OUT="$R" DTYPES="fp32 bf16" bash run.sh train-parity 2>&1 | grep -v "^trained\|^---" | tail -6
echo "=== train-speed small bf16, xl fp32 ($(date -u +%T))"
OUT="$R/speed" CASES="small:bf16 xl:fp32" TS_STRATEGIES="single" TS_TORCH=" " \
  timeout 300 bash run.sh train-speed 2>&1 | grep -E "^(size|xl|small) |rror"
tar czf "${OUT:-/tmp/out}/call28.tgz" -C "$(dirname "$R")" call28 && rm -rf "$R"
echo "=== end ($(date -u +%T))"

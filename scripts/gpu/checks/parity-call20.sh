#!/usr/bin/env bash
# Session 7, call 20 (nvidia-h100-x1, the build of call 18): train-parity in fp32 alone
# (call 19's fp32 files did not all come back), the files copied flat under $OUT.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
DTYPES=fp32 OUT="$OUT/p" bash run.sh train-parity 2>&1 | tail -4
for f in compare.json ours.jsonl torch.jsonl compare.svg; do cp "$OUT/p/parity/fp32/$f" "$OUT/fp32-$f"; done
rm -rf "$OUT/p"

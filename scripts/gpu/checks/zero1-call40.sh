#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/zero1-call40.sh`. Results: $OUT/call40.tgz.
# Session 10, call 40 (nvidia-h100-x1): bench zero1 at NCCL world 1, bf16, no clipping, with
# its new own 1-GPU column (bench single's step in the same run) and graph kernel counts:
# small (ddp, zero1-ahead, ddp again: an order effect?) and xl (ddp, zero1-ahead); then
# bench ddp at world 1 with --clip 1 and without (small bf16).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R="${OUT:-/tmp/out}/call40"; mkdir -p "$R"
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader
echo "=== bench zero1 small bf16 ($(date -u +%T))"
timeout 150 bin/bench zero1 --backend nccl --ranks 1 --size small --dtype bf16 --modes ddp,zero1-ahead,ddp,zero1-overlap \
  --bucket-mb 25 --coalesce --steps 20 --out "$R/bench.jsonl" 2>&1 | grep -v "^\[rank 0\] *$" | tail -6
echo "=== bench zero1 xl bf16 ($(date -u +%T))"
timeout 200 bin/bench zero1 --backend nccl --ranks 1 --size xl --dtype bf16 --modes ddp,zero1-ahead \
  --bucket-mb 25 --coalesce --steps 10 --out "$R/bench.jsonl" 2>&1 | tail -3
python3 - "$R/bench.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(r["size"], r["mode"], f"{r['step_ms']:.3f} ± {r['step_std_ms']:.3f}", "single", r.get("single_ms"), "kernels", r.get("graph_kernels"))
PY
tar czf "${OUT:-/tmp/out}/call40.tgz" -C "$(dirname "$R")" call40 && rm -rf "$R"
echo "=== end ($(date -u +%T))"

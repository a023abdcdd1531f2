#!/usr/bin/env bash
# Runs from the packed folder: copy this file into .gpu/, then on the device
# `bash .gpu/norm-call41.sh`. Results: $OUT/call41.tgz.
# Session 10, call 41 (nvidia-h100-x1): where the clipping norm is taken, now that a stage's
# gradients at small (14 MB bf16 a block) fit in L2: bench single without clipping, then
# --clip 1 with STEP_NORM=after / in-backward / side-stream, alternated twice; small bf16
# (train's 683-token model) and xl bf16.
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
R="${OUT:-/tmp/out}/call41"; mkdir -p "$R"
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader
for size in small xl; do
  steps=30; [ $size = xl ] && steps=15
  bin/bench single --size $size --dtype bf16 --mode step --vocab 683 --steps $steps --save-gemm-choices "$R/gemm-$size.json" --out "$R/single.jsonl" > /dev/null 2>&1
  for rep in 1 2; do
    bin/bench single --size $size --dtype bf16 --mode step --vocab 683 --steps $steps --gemm-choices "$R/gemm-$size.json" --out "$R/single.jsonl" > /dev/null 2>&1
    for n in after in-backward side-stream; do
      STEP_NORM=$n bin/bench single --size $size --dtype bf16 --mode step --vocab 683 --steps $steps --clip 1 \
        --gemm-choices "$R/gemm-$size.json" --out "$R/single.jsonl" > /dev/null 2>&1 || echo "$size $n failed"
    done
  done
done
python3 - "$R/single.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(f"{r['size']:6} adamw {r['adamw']:12} norm {str(r.get('norm')):12} {r['step_ms'][0]:8.3f} ± {r['step_ms'][1]:.3f}  kernels {r.get('graph_kernels')}")
PY
tar czf "${OUT:-/tmp/out}/call41.tgz" -C "$(dirname "$R")" call41 && rm -rf "$R"
echo "=== end ($(date -u +%T))"

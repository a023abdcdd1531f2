#!/usr/bin/env bash
# Session 54, call 296 (nvidia-h200): AdamW's update alone (`bench adamw`): one launch per
# tensor as the step does, one launch over a flat buffer at several grid caps, and a
# device-to-device copy's rate; the experiment's kernel variants (ADAMW_EXP: cs = streaming
# loads and stores, x2 = two float4 a thread an iteration, cs2 = both; ADAMW_THREADS);
# PyTorch's fused AdamW on the same model (anchors/adamw_torch.py), xl and the 6.7B.
# The ADAMW_EXP / ADAMW_THREADS variants lived only in that call's build (seam's adamw.cu
# and fused_adamw.rs, uncommitted; they gained nothing: docs/results/gpus-s54.md); the
# 6.7B rows timed out (that build filled the buffers from the host).
# Copy into .gpu/ with train-runs.sh; anchors/ with torch_best.py and adamw_torch.py.
CALL=c296; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"
aw() { local tag=$1 size=$2; shift 2
  env "$@" timeout 120 bin/bench adamw --size "$size" --iters 20 --out "$R/adamw.jsonl" > "$R/adamw-$size-$tag.txt" 2>&1
  echo "== $size $tag $* rc=$?"; cat "$R/adamw-$size-$tag.txt"; }
nvidia-smi --query-gpu=name,clocks.max.mem,clocks.max.sm,memory.total --format=csv > "$R/gpu.txt"; cat "$R/gpu.txt"
aw base xl
for e in cs x2 cs2; do aw "$e" xl ADAMW_EXP=$e; done
aw t512 xl ADAMW_THREADS=512
aw t128 xl ADAMW_THREADS=128
(cd anchors && timeout 120 python3 adamw_torch.py xl 20) 2>&1 | tail -2 | tee -a "$R/torch-adamw.jsonl"
pack
aw base 6.7B
aw cs 6.7B ADAMW_EXP=cs
(cd anchors && timeout 150 python3 adamw_torch.py 6.7B 10) 2>&1 | tail -2 | tee -a "$R/torch-adamw.jsonl"
pack; echo "done $(date -u +%T)"

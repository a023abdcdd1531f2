#!/usr/bin/env bash
# Session 51, call 284 (nvidia-h200-x2): the 13B at 2048 tokens, 4 a GPU, fsdp at world 2,
# captured, with this session's attention (call 278: 1258.53 ms, 125.13 GiB), beside PyTorch
# FSDP2 compile-blocks with its AC (call 276: 1582.68 ms; without AC out of memory).
# Copy into .gpu/ with train-runs.sh. Output: $OUT/c284.tgz.
CALL=c284; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"; export TMO=200
ENVS="$N" train huge-2k /tmp/r-h 13B 2 fsdp 8 10 --fresh --context 2048 > /dev/null; rm -rf /tmp/r-h
echo "ours 13B 2048 fsdp w2: $(msc huge-2k 8 2048) ms"; grep -h "peak GPU" "$R/huge-2k.txt" | sort | tail -1 | cut -c1-330
t0=$(date +%s)
timeout 230 python3 -m torch.distributed.run --standalone --nproc_per_node 2 anchors/torch_train_best.py "$D" 13B --dtype bf16 \
  --variant compile-blocks --global-batch 8 --steps 6 --warmup-steps 2 --context 2048 --ac --parallel fsdp2 2> "$R/torch-13B-w2.err" | grep '^{' | tee -a "$R/torch.jsonl" | cut -c1-330
echo "torch 13B w2 AC: $(( $(date +%s) - t0 )) s"; pack; echo "done $(date -u +%T)"

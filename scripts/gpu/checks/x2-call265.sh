#!/usr/bin/env bash
# Session 48, call 265 (nvidia-h200-x2): the 13B at 2048 tokens, 4 a GPU, fsdp at world 2,
# with the tiled attention: without activation checkpointing (refused before, plan 179.2
# GiB; now 127.0), eager if the captured step does not fit; with it (call 258: 1733.5 ms,
# 95.30 GiB); PyTorch FSDP2 with its AC (call 258: 1571.6 ms; without, out of memory).
# Copy into .gpu/ with train-runs.sh (msc, peak, torchc: its helpers since session 48). Output: $OUT/c265.tgz.
CALL=c265; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"; export TMO=240
huge() { local n=$1; shift; ENVS="$N" train $n /tmp/r-h 13B 2 fsdp 8 10 --fresh --context 2048 "$@" > /dev/null; local rc=$?; rm -rf /tmp/r-h
  echo "ours 13B 2048 fsdp w2 $n: $(msc $n 8 2048) ms; $(peak $n)"; return $rc; }
huge huge-2k || huge huge-2k-eager --eager
huge huge-2k-ac --activation-checkpointing
t0=$(date +%s)
timeout 240 python3 -m torch.distributed.run --standalone --nproc_per_node 2 anchors/torch_train_best.py "$D" 13B --dtype bf16 \
  --variant compile-blocks --global-batch 8 --steps 6 --warmup-steps 2 --context 2048 --ac --parallel fsdp2 2> "$R/torch-13B-w2.err" | grep '^{' | tee -a "$R/torch.jsonl" | cut -c1-330
echo "torch 13B w2 AC: $(( $(date +%s) - t0 )) s"; pack; echo "done $(date -u +%T)"

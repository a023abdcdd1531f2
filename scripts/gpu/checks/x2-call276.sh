#!/usr/bin/env bash
# Session 50, call 276 (nvidia-h200-x2): the pipelined tiled attention (call 275) end to end,
# beside PyTorch in the same call.
#   13B, 2048 tokens, 4 a GPU, fsdp at world 2, captured (call 269: 1308.73 ms), and PyTorch
#   FSDP2 compile-blocks with its AC (call 269: 1556.93 ms; without AC out of memory);
#   xl, 8 x 1024, one GPU, and PyTorch compile-ro (call 272: 227.41 ms, the fastest variant
#   in call 268).
# Copy into .gpu/ with train-runs.sh. Output: $OUT/c276.tgz.
CALL=c276; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"; export TMO=240
ENVS="$N" train huge-2k /tmp/r-h 13B 2 fsdp 8 10 --fresh --context 2048 > /dev/null; rm -rf /tmp/r-h
echo "ours 13B 2048 fsdp w2: $(msc huge-2k 8 2048) ms; $(peak huge-2k)"
t0=$(date +%s)
timeout 240 python3 -m torch.distributed.run --standalone --nproc_per_node 2 anchors/torch_train_best.py "$D" 13B --dtype bf16 \
  --variant compile-blocks --global-batch 8 --steps 6 --warmup-steps 2 --context 2048 --ac --parallel fsdp2 2> "$R/torch-13B-w2.err" | grep '^{' | tee -a "$R/torch.jsonl" | cut -c1-330
echo "torch 13B w2 AC: $(( $(date +%s) - t0 )) s"; pack
train xl1k /tmp/r-x xl 1 single 8 14 --fresh --context 1024 > /dev/null; rm -rf /tmp/r-x
echo "xl 8x1024: $(msc xl1k 8 1024) ms; $(peak xl1k)"
TV=compile-ro torchc xl 1024
pack; echo "done $(date -u +%T)"

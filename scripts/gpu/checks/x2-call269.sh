#!/usr/bin/env bash
# Session 49, call 269 (nvidia-h200-x2): the captured step at the memory's edge, with the
# validation graph's memory given back before the eager warm-up step (step/eval.rs), and
# the 13B at 2048 tokens with the mma.sync attention.
#   6.7B, 8 x 1024, one GPU, captured (session 48: out of memory, plan 130.9 GiB; call 268
#   --eager 621.05 ms);
#   13B, 2048 tokens, 4 a GPU, fsdp at world 2: captured (call 265: out of memory, plan 127.0),
#   --eager (call 265: 1467.1 ms with the wmma kernel), PyTorch FSDP2 compile-blocks with its
#   AC (call 265: 1571.24 ms; without AC out of memory, call 260), ours with
#   --activation-checkpointing tiled and MODEL_ATTN_TILED=0 (call 266: 1858.6 against 1751.8).
# Copy into .gpu/ with train-runs.sh. Output: $OUT/c269.tgz.
CALL=c269; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"; export TMO=240
ENVS="" train big8 /tmp/r-b 6.7B 1 single 8 12 --fresh --context 1024 > /dev/null; rm -rf /tmp/r-b
echo "6.7B 8x1024 captured: $(msc big8 8 1024) ms; $(peak big8)"; grep -h "step:" "$R/big8.txt" | head -1 | cut -c1-160
huge() { local n=$1 e=$2; shift 2; ENVS="$N $e" train $n /tmp/r-h 13B 2 fsdp 8 10 --fresh --context 2048 "$@" > /dev/null; local rc=$?; rm -rf /tmp/r-h
  echo "ours 13B 2048 fsdp w2 $n: $(msc $n 8 2048) ms; $(peak $n)"; return $rc; }
huge huge-2k ""
huge huge-2k-eager "" --eager
t0=$(date +%s)
timeout 240 python3 -m torch.distributed.run --standalone --nproc_per_node 2 anchors/torch_train_best.py "$D" 13B --dtype bf16 \
  --variant compile-blocks --global-batch 8 --steps 6 --warmup-steps 2 --context 2048 --ac --parallel fsdp2 2> "$R/torch-13B-w2.err" | grep '^{' | tee -a "$R/torch.jsonl" | cut -c1-330
echo "torch 13B w2 AC: $(( $(date +%s) - t0 )) s"; pack
huge huge-ac-tiled "" --activation-checkpointing
huge huge-ac-off MODEL_ATTN_TILED=0 --activation-checkpointing
pack; echo "done $(date -u +%T)"

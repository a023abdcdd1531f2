#!/usr/bin/env bash
# Session 47, call 258 (nvidia-h200-x2): activation checkpointing beside PyTorch's, one call.
#   ours: `train run --activation-checkpointing`, the 13B at 2048 tokens, 4 a GPU, fsdp at
#   world 2 (10 steps), and the 6.7B at 1024 tokens, 8 a GPU, on one GPU (12 steps);
#   PyTorch: torch_train_best.py --ac --context N (torchtitan's full AC: checkpoint_wrapper
#   on every block, compile-blocks, FSDP2 at world 2), the same shapes, 6 steps after 2.
# Copy into .gpu/ with train-runs.sh and nccl/. Output: $OUT/c258.tgz.
CALL=c258; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"; export TMO=240
msc() { python3 -c "
import json,statistics,sys
t=[json.loads(l) for l in open(sys.argv[1]) if '\"train\"' in l]
print(round(int(sys.argv[2])*int(sys.argv[3])/statistics.median(r['tokens_per_s'] for r in t if r['step']>=6)*1e3,1))" "$R/$1.log.jsonl" "$2" "$3"; }
ENVS="$N" train huge-2k-ac /tmp/r-h 13B 2 fsdp 8 10 --fresh --context 2048 --activation-checkpointing > /dev/null
echo "ours 13B 2048 fsdp w2 AC: $(msc huge-2k-ac 8 2048) ms; $(grep -h 'peak GPU' $R/huge-2k-ac.txt | sort | tail -1 | cut -c1-60)"; rm -rf /tmp/r-h
pt() { local t0=$(date +%s) w=$1 m=$2 c=$3 g=$4; shift 4
  local launch=(python3 -m torch.distributed.run --standalone --nproc_per_node $w); [ $w = 1 ] && launch=(python3)
  timeout 280 "${launch[@]}" anchors/torch_train_best.py "$D" $m --dtype bf16 \
    --variant compile-blocks --global-batch $g --steps 6 --warmup-steps 2 --context $c --ac "$@" 2> "$R/torch-$m-w$w.err" | grep '^{' | tee -a "$R/torch.jsonl" | cut -c1-330
  echo "torch $m world $w: $(( $(date +%s) - t0 )) s"; tail -2 "$R/torch-$m-w$w.err" | cut -c1-200; pack; }
pt 2 13B 2048 8 --parallel fsdp2
ENVS="$N" train big-1k-ac /tmp/r-b 6.7B 1 single 8 12 --fresh --context 1024 --activation-checkpointing > /dev/null
echo "ours 6.7B 1024 single AC: $(msc big-1k-ac 8 1024) ms; $(grep -h 'peak GPU' $R/big-1k-ac.txt | cut -c1-60)"; rm -rf /tmp/r-b
pt 1 6.7B 1024 8
pack; echo "done $(date -u +%T)"

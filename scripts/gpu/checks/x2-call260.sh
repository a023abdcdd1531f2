#!/usr/bin/env bash
# Session 47, call 260 (nvidia-h200-x2): selective activation checkpointing
# (`--activation-checkpointing selective`: the attention's probabilities made again in the
# backward) where full was needed before, beside PyTorch without its AC (flash attention
# keeps no probabilities), one call:
#   the 13B at 2048 tokens, 4 a GPU, fsdp at world 2 (plan: 131.7 GiB selective, 92.9 full;
#   call 258: full 1733.5 ms, PyTorch FSDP2 with AC 1571.6);
#   small at 256 tokens, off against selective: the same bits;
#   the 6.7B at 1024 tokens, 8 a GPU, one GPU (plan: 132.0 GiB; call 258: full 824.4 ms,
#   PyTorch with AC 778.9).
# Copy into .gpu/ with train-runs.sh and nccl/. Output: $OUT/c260.tgz.
CALL=c260; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"; export TMO=200
msc() { python3 -c "
import json,statistics,sys
t=[json.loads(l) for l in open(sys.argv[1]) if '\"train\"' in l]
print(round(int(sys.argv[2])*int(sys.argv[3])/statistics.median(r['tokens_per_s'] for r in t if r['step']>=6)*1e3,1))" "$R/$1.log.jsonl" "$2" "$3"; }
pt() { local t0=$(date +%s) w=$1 m=$2 c=$3 g=$4; shift 4
  local launch=(python3 -m torch.distributed.run --standalone --nproc_per_node $w); [ $w = 1 ] && launch=(python3)
  timeout 150 "${launch[@]}" anchors/torch_train_best.py "$D" $m --dtype bf16 \
    --variant compile-blocks --global-batch $g --steps 6 --warmup-steps 2 --context $c "$@" 2> "$R/torch-$m-w$w.err" | grep '^{' | tee -a "$R/torch.jsonl" | cut -c1-330
  echo "torch $m world $w: $(( $(date +%s) - t0 )) s"; grep -m1 -o "OutOfMemoryError[^.]*" "$R/torch-$m-w$w.err"; pack; }
ENVS="$N" train huge-sel /tmp/r-h 13B 2 fsdp 8 10 --fresh --context 2048 --activation-checkpointing selective > /dev/null
echo "ours 13B 2048 fsdp w2 selective: $(msc huge-sel 8 2048) ms; $(grep -h 'peak GPU' $R/huge-sel.txt | sort | tail -1 | cut -c1-60)"; tail -2 "$R/huge-sel.txt" | cut -c1-200; rm -rf /tmp/r-h
pt 2 13B 2048 8 --parallel fsdp2
# The bits: small at 256 tokens (no one-kernel attention), 8 a GPU, off against selective.
for m in off selective; do ENVS="$N" train small-$m /tmp/r-s small 1 single 8 20 --fresh --context 256 --activation-checkpointing $m > /dev/null; rm -rf /tmp/r-s; done
same small-off small-selective
ENVS="$N" train big-sel /tmp/r-b 6.7B 1 single 8 12 --fresh --context 1024 --activation-checkpointing selective > /dev/null
echo "ours 6.7B 1024 single selective: $(msc big-sel 8 1024) ms; $(grep -h 'peak GPU' $R/big-sel.txt | cut -c1-60)"; rm -rf /tmp/r-b
pt 1 6.7B 1024 8
pack; echo "done $(date -u +%T)"

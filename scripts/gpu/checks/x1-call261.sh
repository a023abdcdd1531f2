#!/usr/bin/env bash
# Session 48, call 261 (nvidia-h200): the tiled (flash) attention above 128 tokens.
#   bench model-check (its fused-kernel rows hold the tiled attention at t 192, 256, 512);
#   xl, 8 x 1024 tokens, one GPU: tiled against MODEL_ATTN_TILED=0 (the composed ops);
#   small at 256 tokens: eager against captured, the same bits;
#   the 6.7B at 8 x 1024 on one GPU without activation checkpointing (refused before: plan
#   147 GiB; now 130.9), beside PyTorch's strongest there (compile-blocks, flash SDPA; call
#   260: 638.7 ms, 126.76 GiB); xl at 1024 beside PyTorch's too.
# Copy into .gpu/ with train-runs.sh. Output: $OUT/c261.tgz.
CALL=c261; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"; export TMO=200
msc() { python3 -c "
import json,statistics,sys
t=[json.loads(l) for l in open(sys.argv[1]) if '\"train\"' in l]
print(round(int(sys.argv[2])*int(sys.argv[3])/statistics.median(r['tokens_per_s'] for r in t if r['step']>=6)*1e3,2))" "$R/$1.log.jsonl" "$2" "$3"; }
peak() { grep -h 'peak GPU' "$R/$1.txt" | sort | tail -1 | cut -c1-70; }
pt() { local t0=$(date +%s) m=$1 c=$2; shift 2
  timeout 200 python3 anchors/torch_train_best.py "$D" $m --dtype bf16 \
    --variant compile-blocks --global-batch 8 --steps 6 --warmup-steps 2 --context $c "$@" 2> "$R/torch-$m-$c.err" | grep '^{' | tee -a "$R/torch.jsonl" | cut -c1-330
  echo "torch $m $c: $(( $(date +%s) - t0 )) s"; grep -m1 -o "OutOfMemoryError[^.]*" "$R/torch-$m-$c.err"; pack; }
t0=$(date +%s); timeout 240 bin/bench model-check > "$R/model-check.txt" 2>&1; echo "model-check rc=$? ($(( $(date +%s) - t0 )) s)"
grep -i "attention\|fail\|error" "$R/model-check.txt" | cut -c1-200; pack
for v in tiled off; do
  e=""; [ $v = off ] && e="MODEL_ATTN_TILED=0"
  ENVS="$e" train xl1k-$v /tmp/r-x xl 1 single 8 14 --fresh --context 1024 > /dev/null; rm -rf /tmp/r-x
  echo "xl 8x1024 $v: $(msc xl1k-$v 8 1024) ms; $(peak xl1k-$v)"
done
for m in captured eager; do
  a=""; [ $m = eager ] && a="--eager"
  train small-$m /tmp/r-s small 1 single 8 20 --fresh --context 256 $a > /dev/null; rm -rf /tmp/r-s
done
same small-captured small-eager
ENVS="" train big1k /tmp/r-b 6.7B 1 single 8 12 --fresh --context 1024 > /dev/null
echo "ours 6.7B 8x1024 single, no AC: $(msc big1k 8 1024) ms; $(peak big1k)"; tail -2 "$R/big1k.txt" | cut -c1-200; rm -rf /tmp/r-b
pt 6.7B 1024
pt xl 1024
pack; echo "done $(date -u +%T)"

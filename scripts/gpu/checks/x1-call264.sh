#!/usr/bin/env bash
# Session 48, call 264 (nvidia-h200): the tiled attention with base-2 exponentials and
# 16-byte scratch reads, beside PyTorch's strongest trainer at 1024 tokens.
#   bench model-check (the tiled attention's rows); bench profile, xl bf16 at 8 x 1024;
#   xl, 8 x 1024, one GPU: tiled against MODEL_ATTN_TILED=0 (call 263: 258.63 against 253.22);
#   the 6.7B at 8 x 1024 on one GPU without activation checkpointing, eager (call 262:
#   711.28 ms, 118.16 GiB);
#   PyTorch (torch_train_best.py compile-blocks, flash SDPA) at xl and 6.7B, 8 x 1024.
# Copy into .gpu/ with train-runs.sh. Output: $OUT/c264.tgz.
CALL=c264; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"; export TMO=200
msc() { python3 -c "
import json,statistics,sys
t=[json.loads(l) for l in open(sys.argv[1]) if '\"train\"' in l]
print(round(int(sys.argv[2])*int(sys.argv[3])/statistics.median(r['tokens_per_s'] for r in t if r['step']>=6)*1e3,2))" "$R/$1.log.jsonl" "$2" "$3" 2>/dev/null; }
peak() { grep -h 'peak GPU' "$R/$1.txt" | sort | tail -1 | cut -c1-70; grep -h "error" "$R/$1.txt" | head -2 | cut -c1-200; }
pt() { local t0=$(date +%s) m=$1 c=$2; shift 2
  timeout 200 python3 anchors/torch_train_best.py "$D" $m --dtype bf16 \
    --variant compile-blocks --global-batch 8 --steps 6 --warmup-steps 2 --context $c "$@" 2> "$R/torch-$m-$c.err" | grep '^{' | tee -a "$R/torch.jsonl" | cut -c1-330
  echo "torch $m $c: $(( $(date +%s) - t0 )) s"; grep -m1 -o "OutOfMemoryError[^.]*" "$R/torch-$m-$c.err"; pack; }
t0=$(date +%s); timeout 240 bin/bench model-check > "$R/model-check.txt" 2>&1; echo "model-check rc=$? ($(( $(date +%s) - t0 )) s)"
grep -i "tiled\|fail\|error" "$R/model-check.txt" | cut -c1-200; pack
timeout 120 bin/bench profile --size xl --dtype bf16 --context 1024 --out "$R/profile-tiled.jsonl" --svg-dir "$R/svg" > "$R/profile-tiled.txt" 2>&1
echo "profile rc=$?"; sed -n 2p "$R/profile-tiled.txt"; grep "attn/core" "$R/profile-tiled.txt" | head -2; rm -rf "$R/svg"; pack
for v in tiled off; do
  e=""; [ $v = off ] && e="MODEL_ATTN_TILED=0"
  ENVS="$e" train xl1k-$v /tmp/r-x xl 1 single 8 14 --fresh --context 1024 > /dev/null; rm -rf /tmp/r-x
  echo "xl 8x1024 $v: $(msc xl1k-$v 8 1024) ms; $(peak xl1k-$v)"
done
pt xl 1024
ENVS="" train big8-eager /tmp/r-b 6.7B 1 single 8 12 --fresh --context 1024 --eager > /dev/null; rm -rf /tmp/r-b
echo "6.7B 8x1024 eager: $(msc big8-eager 8 1024) ms; $(peak big8-eager)"
pt 6.7B 1024
pack; echo "done $(date -u +%T)"

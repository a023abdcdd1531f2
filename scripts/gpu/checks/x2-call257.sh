#!/usr/bin/env bash
# Session 47, call 257 (nvidia-h200-x2): activation checkpointing (`train run
# --activation-checkpointing`), each pair of runs in this one call:
#   xl bf16 at world 1, 8 and 32 x 128 tokens; at world 2, zero1 and fsdp, 8 x 128 a GPU:
#   the step and the peak without and with, and whether the two logged the same losses
#   and norms, bit for bit;
#   the 6.7B at 1024 tokens a sequence, 8 a GPU, on one GPU (the plan: 147.0 GiB without,
#   102.3 with), and the 13B at 2048 tokens, 4 a GPU, fsdp at world 2 (179.2 without,
#   92.9 with): refused without, trained with.
# Copy into .gpu/ with train-runs.sh and nccl/. Output: $OUT/c257.tgz.
CALL=c257; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"; export TMO=200
# The median step (ms) from step 6 of run NAME: GLOBAL sequences of CTX tokens a step.
msc() { python3 -c "
import json,statistics,sys
t=[json.loads(l) for l in open(sys.argv[1]) if '\"train\"' in l]
print(round(int(sys.argv[2])*int(sys.argv[3])/statistics.median(r['tokens_per_s'] for r in t if r['step']>=6)*1e3,2))" "$R/$1.log.jsonl" "$2" "$3"; }
pair() { # NAME MODEL WORLD STRATEGY GLOBAL STOP CTX [args]
  local n=$1 m=$2 w=$3 st=$4 g=$5 k=$6 c=$7; shift 7
  ENVS="$N" train "$n" "/tmp/r-$n" "$m" "$w" "$st" "$g" "$k" --fresh --context "$c" "$@"
  ENVS="$N" train "$n-ac" "/tmp/r-$n-ac" "$m" "$w" "$st" "$g" "$k" --fresh --context "$c" --activation-checkpointing "$@"
  [ -f "$R/$n.log.jsonl" ] && [ -f "$R/$n-ac.log.jsonl" ] && { echo "$n: $(msc $n $g $c) ms, with: $(msc $n-ac $g $c) ms"; same "$n" "$n-ac"; }
  rm -rf "/tmp/r-$n" "/tmp/r-$n-ac"; pack
}
pair xl8 xl 1 single 8 20 128
pair xl32 xl 1 single 32 20 128
pair xl8-z1 xl 2 zero1 16 20 128
pair xl8-fsdp xl 2 fsdp 16 20 128
pair big-1k 6.7B 1 single 8 12 1024
pair huge-2k 13B 2 fsdp 8 10 2048
echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Session 58, call 328 (nvidia-h200): the tiled attention as the rule's kernel at 64 and 128
# tokens (memplan::attention), against the one-block kernel there (MODEL_ATTN_TILED=0), at
# every head width the named sizes have at 8 x 128 tokens: xl (64), 2.7B (80), 6.7B (128),
# and small (64, 12 heads: 96 blocks). Written before: xl -0.3 ms (call 327); the others
# not known.
# 1. bench model-check, whole (its attention rows and its verdict);
# 2. `train run` single, bf16, 8 x 128, each size's own GEMM table, tiled and one-block
#    interleaved (xl twice), bits compared within each kind.
CALL=c328; TABLE_ONLY=; source "$(dirname "$0")/train-runs.sh"
modelcheck "attention\|fail\|error"
tail -2 "$R/model-check.txt"
run() { local m=$1 n=$2 g=$3; shift 3; ENVS="$*" train $n /tmp/r-$n $m 1 single 8 $g --fresh; }
for m in xl small 2.7B 6.7B; do
  st=20; [ $m = 6.7B ] && st=14
  run $m t-$m $st
  run $m $m-tiled1 $st; run $m $m-whole1 $st MODEL_ATTN_TILED=0
  [ $m = xl ] && { run $m $m-tiled2 $st; run $m $m-whole2 $st MODEL_ATTN_TILED=0; same xl-tiled1 xl-tiled2 0; same xl-whole1 xl-whole2 0; }
done
pack; echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Session 49, call 270 (nvidia-h200-x2): the validation graph's memory, kept (as before this
# session: STEP_KEEP_EVAL_GRAPH_MEMORY=1, a switch of this call's binary only) against given
# back before the eager warm-up step, the 6.7B at 8 x 1024 on one GPU, captured; the same
# --eager in this call (call 269: captured 632.33 ms, 128.92 GiB); the 13B at 2048 tokens,
# fsdp at world 2, with --activation-checkpointing and MODEL_ATTN_TILED=0 (call 269: tiled
# 1696.58 ms; the composed run did not finish in that call).
# Copy into .gpu/ with train-runs.sh. Output: $OUT/c270.tgz.
CALL=c270; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"; export TMO=200
big() { local n=$1 e=$2; shift 2; ENVS="$e" train $n /tmp/r-b 6.7B 1 single 8 12 --fresh --context 1024 "$@" > /dev/null; rm -rf /tmp/r-b
  echo "6.7B 8x1024 $n: $(msc $n 8 1024) ms; $(peak $n)"; }
big big8-keep STEP_KEEP_EVAL_GRAPH_MEMORY=1
big big8 ""
big big8-eager "" --eager
ENVS="$N MODEL_ATTN_TILED=0" train huge-ac-off /tmp/r-h 13B 2 fsdp 8 10 --fresh --context 2048 --activation-checkpointing > /dev/null; rm -rf /tmp/r-h
echo "13B 2048 fsdp w2 AC off: $(msc huge-ac-off 8 2048) ms; $(peak huge-ac-off)"
pack; echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Session 48, call 266 (nvidia-h200-x2): with activation checkpointing, the 13B at 2048
# tokens, 4 a GPU, fsdp at world 2: the tiled attention against MODEL_ATTN_TILED=0 in one
# call (call 265: tiled 1883.7 ms, 89.41 GiB; call 258, composed: 1733.5 ms, 95.30 GiB).
# Copy into .gpu/ with train-runs.sh (msc, peak, torchc: its helpers since session 48). Output: $OUT/c266.tgz.
CALL=c266; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"; export TMO=240
for v in off tiled; do
  e="$N"; [ $v = off ] && e="$N MODEL_ATTN_TILED=0"
  ENVS="$e" train huge-ac-$v /tmp/r-h 13B 2 fsdp 8 10 --fresh --context 2048 --activation-checkpointing > /dev/null; rm -rf /tmp/r-h
  echo "13B 2048 fsdp w2 AC $v: $(msc huge-ac-$v 8 2048) ms; $(peak huge-ac-$v)"
done
pack; echo "done $(date -u +%T)"

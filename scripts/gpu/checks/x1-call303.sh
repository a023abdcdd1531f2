#!/usr/bin/env bash
# Session 55, call 303 (nvidia-h200):
#   1. `train run` xl fp32 (no TF32) without clipping, where AdamW runs on a second stream
#      beside the backward: old binaries (old/bin: StepOptions::side_blocks 0, the update
#      kernels' full grid, uncapped since session 54) against new (step::ADAMW_SIDE_BLOCKS,
#      264, bench single's default), interleaved, then `same` (the cap changes no bits).
#      Written before: about -5 ms of about 300 (runs 29-31: 303.91 full grid, 298.94 at 264).
#   2. The RMSNorm backward at 2,048 and 4,096 rows (xl at 8 x 256 and 8 x 512, bf16):
#      MODEL_NORM_BWD=one (the default there) against wide.
# Copy into .gpu/ with train-runs.sh and old/bin. Output: $OUT/c303.tgz.
CALL=c303; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"
ftrain() { local n=$1 t0=$(date +%s); shift
  timeout 150 bin/train run --data "$D" --out /tmp/r-$n --model xl --global-batch 8 --steps 100000 --stop-after 14 \
    --eval-every 100000 --strategy single --no-progress --fresh --clip 0 "$@" > "$R/$n.txt" 2>&1 || { echo "$n failed"; tail -3 "$R/$n.txt"; }
  cp /tmp/r-$n/log.jsonl "$R/$n.log.jsonl"; rm -rf /tmp/r-$n
  echo "$n ($(( $(date +%s) - t0 )) s): $(msc $n 8 128) ms; $(peak $n)"; grep -m1 -i "adamw\|side" "$R/$n.txt" | cut -c1-160; pack; }
for k in 1 2; do use old; ftrain f32-old-$k; use new; ftrain f32-new-$k; done
same f32-old-1 f32-new-1; same f32-new-1 f32-new-2
for c in 256 512; do for v in one wide; do
  ENVS="MODEL_NORM_BWD=$v" TMO=150 train "n$c-$v" /tmp/r-n xl 1 single 8 16 --fresh --context $c > /dev/null; rm -rf /tmp/r-n
  echo "xl 8x$c $v: $(msc n$c-$v 8 $c) ms"; done; same n$c-one n$c-wide; done
pack; echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Session 33, call 176: FOUR GPUs (asked nvidia-h200-x4), from the packed folder (copy this and
# train-runs.sh into .gpu/). About 10 minutes.
# 1. DDP's split all-reduce (ddp::split, DDP_SPLIT=1) against the whole one, bucketed:25 at
#    worlds 2 and 4, beside one GPU; eager against replayed at world 4, bit for bit.
# 2. The GPU checks session 32 left: comm-selftest at worlds 4 and 2 (the zero-CTA
#    communicator at world 2), `bench model-check` and `zero1-check` at world 4.
CALL=split176; source "$(dirname "$0")/train-runs.sh"; export TMO=90
xl single 1 single
xl b4 4 bucketed:25 $N DDP_SPLIT=0
xl b4s 4 bucketed:25 $N DDP_SPLIT=1
same b4 b4s
ENVS="$N DDP_SPLIT=1" train b4s-e /tmp/r-b4s-e xl 4 bucketed:25 32 12 --fresh --eager
same b4s b4s-e
xl b2 2 bucketed:25 $N DDP_SPLIT=0
xl b2s 2 bucketed:25 $N DDP_SPLIT=1
xl z4 4 zero1 $N
xl single-b 1 single
pack
for w in 4 2; do
  env $N timeout 90 bin/comm-launch --nproc-per-node $w -- bin/comm-selftest > "$R/selftest-w$w.txt" 2>&1
  echo "selftest world $w: rc $?"; grep -h "rank 0/" "$R/selftest-w$w.txt" | tail -2; grep -hi "error\|fail" "$R/selftest-w$w.txt" | head -3
done
pack
( OUT=$R timeout 240 bash run.sh model-check zero1-check > "$R/checks.txt" 2>&1; echo "model-check zero1-check: rc $?" ); tail -5 "$R/checks.txt"; pack
echo "done $(date -u +%T)"

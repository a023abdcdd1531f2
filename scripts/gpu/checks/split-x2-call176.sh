#!/usr/bin/env bash
# Session 33, call 176: TWO GPUs (nvidia-h200-x2; no 4-GPU kind was lent), from the packed
# folder (copy this and train-runs.sh into .gpu/). About 6 minutes.
# 1. DDP's split all-reduce (ddp::split, DDP_SPLIT=1) against the whole one, bucketed:25 at
#    world 2, beside one GPU; eager against replayed, bit for bit.
# 2. comm-selftest at world 2 (the zero-CTA communicator, not yet run on a GPU).
CALL=split176; source "$(dirname "$0")/train-runs.sh"; export TMO=90
xl single 1 single
xl b2 2 bucketed:25 $N DDP_SPLIT=0
xl b2s 2 bucketed:25 $N DDP_SPLIT=1
same b2 b2s
ENVS="$N DDP_SPLIT=1" train b2s-e /tmp/r-b2s-e xl 2 bucketed:25 16 12 --fresh --eager
same b2s b2s-e
xl z2 2 zero1 $N
xl b2s-2 2 bucketed:25 $N DDP_SPLIT=1
xl b2-2 2 bucketed:25 $N DDP_SPLIT=0
xl single-b 1 single
pack
env $N timeout 90 bin/comm-launch --nproc-per-node 2 -- bin/comm-selftest > "$R/selftest-w2.txt" 2>&1
echo "selftest world 2: rc $?"; grep -h "rank 0/" "$R/selftest-w2.txt" | tail -2; grep -hi "error\|fail" "$R/selftest-w2.txt" | head -3
pack
echo "done $(date -u +%T)"

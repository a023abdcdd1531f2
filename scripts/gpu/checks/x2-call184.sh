#!/usr/bin/env bash
# Session 34, call 184: TWO GPUs (nvidia-h200-x2), from the packed folder (copy this and
# train-runs.sh into .gpu/). About 8 minutes. The norm's sums of squares summed by the
# copy-engine adds (comm::Deferred::sumsq; DDP_SUMSQ=0 reads the parts after the backward,
# as before) for split DDP (each launch gathered in the backward, now the default at world
# 2) and ZeRO-1; comm-selftest at world 2 (its new checks), also with the adds on the
# communication stream (COMM_CE_ADDS=wait); eager against replayed; one replay's timeline.
CALL=x2c184; source "$(dirname "$0")/train-runs.sh"; export TMO=90
for a in "" "COMM_CE_ADDS=wait"; do
  env $N $a timeout 90 bin/comm-launch --nproc-per-node 2 -- bin/comm-selftest > "$R/selftest-w2$a.txt" 2>&1
  echo "selftest world 2 $a: rc $?"; grep -h "rank 0/" "$R/selftest-w2$a.txt" | tail -1; grep -hi "error\|fail" "$R/selftest-w2$a.txt" | head -3
done
xl single 1 single
xl b2 2 bucketed:25 $N
xl b2-parts 2 bucketed:25 $N DDP_SUMSQ=0
xl b2-late 2 bucketed:25 $N DDP_SPLIT_EARLY=0
xl z2 2 zero1 $N
xl z2-parts 2 zero1 $N DDP_SUMSQ=0
ENVS="$N" train b2-e /tmp/r-b2-e xl 2 bucketed:25 16 12 --fresh --eager
same b2 b2-e
ENVS="$N COMM_CE_ADDS=wait" train b2-w /tmp/r-b2-w xl 2 bucketed:25 16 20 --fresh
same b2 b2-w
ENVS="$N" train z2-e /tmp/r-z2-e xl 2 zero1 16 12 --fresh --eager
same z2 z2-e
xl b2-2 2 bucketed:25 $N
xl b2-parts-2 2 bucketed:25 $N DDP_SUMSQ=0
xl z2-2 2 zero1 $N
xl z2-parts-2 2 zero1 $N DDP_SUMSQ=0
xl single-2 1 single
pack
env TRACE_KEEP=1 TRACE_BATCH=8 TRACE_STRATEGIES="bucketed:25" TRACE_WORLD=2 OUT=$R bash run.sh trace > "$R/trace-job.txt" 2>&1 || echo "trace failed"
traces 3
pack
echo "done $(date -u +%T)"

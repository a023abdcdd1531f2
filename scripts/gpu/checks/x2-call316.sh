#!/usr/bin/env bash
# Session 56, call 316 (nvidia-h200-x2): after the review's mend of comm's gather lane
# (its copy-engine plan made once, 1bedcca): comm-selftest at world 2, then xl bf16
# bucketed:25 at world 2, 20 steps: a first run that writes the GEMM table (its rank 1
# tunes its own: not compared), then one run without the lane and one with it, both reading
# that table, compared bit for bit.
CALL=c316; TABLE_ONLY=; source "$(dirname "$0")/train-runs.sh"
env $N timeout 60 bin/comm-launch --nproc-per-node 2 -- bin/comm-selftest > "$R/selftest-w2.txt" 2>&1; echo "selftest w2 rc=$?"; tail -2 "$R/selftest-w2.txt"
xl w-0 2 bucketed:25 $N
xl o-1 2 bucketed:25 $N COMM_CE_GATHER_LANE=0
xl l-1 2 bucketed:25 $N
same o-1 l-1 0
pack; echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Session 38, call 212 (nvidia-h200-x4), about 2.5 minutes. Copy this and train-runs.sh into
# .gpu/. The copy-engine plan as committed: a launch's gathers into windows go by the copy
# engines, one gather a window, the rest by NCCL. comm-selftest at world 4 with them; split
# DDP with COMM_CE_GATHER=1 (its launches span a window per gradient: now all on the copy
# engines); zero1 with them against NCCL's (the same bits).
CALL=call212; source "$(dirname "$0")/train-runs.sh"
env $N COMM_CE_GATHER=1 timeout 60 bin/comm-launch --nproc-per-node 4 -- bin/comm-selftest > $R/selftest.txt 2>&1; echo "selftest rc=$?: $(grep -h "rank 0" $R/selftest.txt | cut -c1-150)"
xl d4 4 bucketed:25 $N
xl d4-ceg 4 bucketed:25 $N COMM_CE_GATHER=1
xl z4 4 zero1 $N
xl z4-ceg 4 zero1 $N COMM_CE_GATHER=1
same d4 d4-ceg; same z4 z4-ceg
pack; echo "done $(date -u +%T)"

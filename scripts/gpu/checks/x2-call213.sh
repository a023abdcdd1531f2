#!/usr/bin/env bash
# Session 38, call 213 (nvidia-h200-x2), about 2 minutes. Copy this and train-runs.sh into
# .gpu/. World 2, where comm's copy-engine gathers are on by default: comm-selftest (its
# launches across windows and plain tensors now split between the copy engines and NCCL),
# and bucketed:25, zero1 and fsdp beside single, against call 203's world-2 figures.
CALL=call213; source "$(dirname "$0")/train-runs.sh"
env $N timeout 60 bin/comm-launch --nproc-per-node 2 -- bin/comm-selftest > $R/selftest.txt 2>&1; echo "selftest rc=$?: $(grep -h "rank 0" $R/selftest.txt | cut -c1-150)"
xl single1 1 single $N
xl d2 2 bucketed:25 $N
xl z2 2 zero1 $N
xl f2 2 fsdp $N
pack; echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Session 33, call 178: FOUR GPUs (nvidia-h200-x4), from the packed folder (copy this and
# train-runs.sh into .gpu/). About 9 minutes.
# 1. DDP's split all-reduce with its gathers grouped (DDP_SPLIT_GATHER_MB, 100 by default;
#    call 177's one bucket a gather ran by NCCL's LL protocol, 18 ms): at world 2 (the
#    default there) and world 4 (DDP_SPLIT=1), against the whole all-reduce and one GPU;
#    groups of 200, and one bucket a gather with NCCL_PROTO=Simple; world 4 eager against
#    replayed, bit for bit; zero1 beside.
# 2. One replay's CUPTI timeline of bucketed:25 split at world 4.
# 3. The GPU checks: comm-selftest at world 4, `bench model-check` and `zero1-check`.
CALL=split178; source "$(dirname "$0")/train-runs.sh"; export TMO=90
xl single 1 single
xl b2s 2 bucketed:25 $N
xl b2 2 bucketed:25 $N DDP_SPLIT=0
xl b2s-200 2 bucketed:25 $N DDP_SPLIT_GATHER_MB=200
xl b2s-simple 2 bucketed:25 $N DDP_SPLIT_GATHER_MB=0 NCCL_PROTO=Simple
same b2s b2s-200
xl b4s 4 bucketed:25 $N DDP_SPLIT=1
xl b4 4 bucketed:25 $N DDP_SPLIT=0
xl b4s-200 4 bucketed:25 $N DDP_SPLIT=1 DDP_SPLIT_GATHER_MB=200
xl b4s-simple 4 bucketed:25 $N DDP_SPLIT=1 DDP_SPLIT_GATHER_MB=0 NCCL_PROTO=Simple
ENVS="$N DDP_SPLIT=1" train b4s-e /tmp/r-b4s-e xl 4 bucketed:25 32 12 --fresh --eager
same b4s b4s-e
xl z4 4 zero1 $N
xl single-b 1 single
pack
env $N DDP_SPLIT=1 TRACE_KEEP=1 TRACE_BATCH=8 TRACE_STRATEGIES="bucketed:25" TRACE_WORLD=4 OUT=$R bash run.sh trace > "$R/trace-job.txt" 2>&1 || echo "trace failed"
traces 4
pack
env $N timeout 90 bin/comm-launch --nproc-per-node 4 -- bin/comm-selftest > "$R/selftest-w4.txt" 2>&1
echo "selftest world 4: rc $?"; grep -h "rank 0/" "$R/selftest-w4.txt" | tail -2; grep -hi "error\|fail" "$R/selftest-w4.txt" | head -3
( OUT=$R timeout 200 bash run.sh model-check zero1-check > "$R/checks.txt" 2>&1; echo "model-check zero1-check: rc $?" ); tail -5 "$R/checks.txt"; pack
echo "done $(date -u +%T)"

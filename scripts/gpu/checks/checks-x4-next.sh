#!/usr/bin/env bash
# Not yet run (written in session 32). FOUR GPUs, best nvidia-h100-x4, from the packed folder
# (copy this and train-runs.sh into .gpu/). About 6 minutes. The checks session 32 left:
# 1. comm-selftest (the conformance suite) at worlds 4 and 2: at world 2 the communicator now
#    asks NCCL for its zero-CTA policy (ncclCommInitRankConfig);
# 2. `bench model-check` and `zero1-check` at world 4 (issue 47's GPU correctness bars);
# 3. zero1 at worlds 2 and 4 against one GPU on this kind, with the adds at the wait
#    (COMM_CE_ADDS=wait) beside the default.
CALL=checks; source "$(dirname "$0")/train-runs.sh"; export TMO=60
for w in 4 2; do
  env $N timeout 90 bin/comm-launch --nproc-per-node $w -- bin/comm-selftest > "$R/selftest-w$w.txt" 2>&1
  echo "selftest world $w: rc $?"; grep -h "rank 0/" "$R/selftest-w$w.txt" | tail -2; grep -hi "error\|fail" "$R/selftest-w$w.txt" | head -3
done
pack
( OUT=$R timeout 240 bash run.sh model-check zero1-check > "$R/checks.txt" 2>&1; echo "model-check zero1-check: rc $?" ); tail -5 "$R/checks.txt"; pack
xl single 1 single
for w in 2 4; do
  xl z$w $w zero1 $N
  xl z$w-wait $w zero1 $N COMM_CE_ADDS=wait
  same z$w z$w-wait
done
xl single-b 1 single
pack
echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Session 38, call 207 (nvidia-h200-x4), about 5 minutes. ZERO1_CE_GATHER_EVERY and the
# API behind it were removed after this call (slower: docs/results/gpus-s38.md); a record. Copy this, phases.py and
# train-runs.sh into .gpu/. Call 206: with every ZeRO-1 gather on the copy engines the
# forward's kernels run at one GPU's speed but wait for the parameters (175 GB/s); with
# NCCL's kernels they arrive in time but the GEMMs take 30 % longer. Here every K-th bucket
# goes by the copy engines on a stream beside NCCL's kernels (ZERO1_CE_GATHER_EVERY=K with
# COMM_CE_GATHER=1), so that both bring parameters in at once. 8 and 32 rows; eager against
# replayed; a kernel-only timeline.
CALL=call207; source "$(dirname "$0")/train-runs.sh"
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
C="COMM_CE_GATHER=1 ZERO1_CE_GATHER_EVERY"
env $N COMM_CE_GATHER=1 timeout 60 bin/comm-launch --nproc-per-node 4 -- bin/comm-selftest > $R/selftest.txt 2>&1; echo "selftest rc=$? $(grep -c . $R/selftest.txt) lines: $(grep -i "pass\|fail\|checks" $R/selftest.txt | head -2 | cut -c1-120)"
xl single1 1 single $N
xl z4 4 zero1 $N
for k in 2 3 4; do xl z4-e$k 4 zero1 $N $C=$k; done
xl z4-e2-a4 4 zero1 $N $C=2 ZERO1_PARAM_GATHER=adamw:4
r32() { local n=$1 w=$2 st=$3; shift 3; ENVS="$*" train $n /tmp/r-$n xl $w $st $((32 * w)) 20 --fresh; }
r32 s32 1 single $N
r32 z32 4 zero1 $N
for k in 2 3; do r32 z32-e$k 4 zero1 $N $C=$k; done
ENVS="$N $C=3" train z4-e3-e /tmp/r-z4-e3-e xl 4 zero1 32 12 --fresh --eager
ENVS="$N $C=3" train z4-e3-r /tmp/r-z4-e3-r xl 4 zero1 32 12 --fresh
same z4-e3-e z4-e3-r; same z4 z4-e3
echo "runs done: $(el) s"
[ $(el) -lt 280 ] && { env COMM_CE_GATHER=1 ZERO1_CE_GATHER_EVERY=3 LD_LIBRARY_PATH="$PWD/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CUPTI_TRACE_KERNELS_ONLY=1 TRACE_KEEP=1 TRACE_BATCH=8 TRACE_WORLD=4 \
    TRACE_STRATEGIES="zero1" OUT=$R/kc timeout 100 bash run.sh trace 2>&1 | grep -i "fail\|error" | grep -v "^\[rank" | head -3
  python3 phases.py $R/kc/trace-zero1-a1.csv.gz; cp $R/kc/trace-zero1-a1.csv.gz $O/z3.csv.gz; rm -f $R/kc/*.csv.gz; }
pack; echo "done $(date -u +%T), $(el) s"

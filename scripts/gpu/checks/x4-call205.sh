#!/usr/bin/env bash
# Session 38's first 4-GPU call (nvidia-h200-x4), about 9.5 minutes. Copy this, phases.py,
# replays.py and train-runs.sh into .gpu/. Session 37's x4-next-s37.sh, widened:
# 1. 8 rows: the gathers beside split DDP's AdamW by the copy engines (COMM_CE_GATHER=1),
#    also chained in the backward (DDP_SPLIT_EARLY=1); the copy-engine adds on 132 blocks
#    (COMM_CE_ADDS_BLOCKS); zero1 gathering by the copy engines.
# 2. 32 rows, where the backward (64 ms) has time for the copy engines to move both halves
#    of DDP's all-reduce: DDP with its gathers chained in the backward by the copy engines;
#    zero1 gathering by the copy engines.
# 3. Per-phase timelines with kernel records only (phases.py: span and busy time of the
#    forward, backward, tail and AdamW on the compute stream): single, zero1, bucketed:25 at
#    world 4, 8 rows; then zero1 gathering by the copy engines, as time allows.
CALL=call205; source "$(dirname "$0")/train-runs.sh"
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
xl single1 1 single $N
xl z4 4 zero1 $N
xl z4-ceg 4 zero1 $N COMM_CE_GATHER=1
xl d4 4 bucketed:25 $N
xl d4-ceg 4 bucketed:25 $N COMM_CE_GATHER=1
xl d4-early 4 bucketed:25 $N COMM_CE_GATHER=1 DDP_SPLIT_EARLY=1
xl d4-b132 4 bucketed:25 $N COMM_CE_ADDS_BLOCKS=132
r32() { local n=$1 w=$2 st=$3; shift 3; ENVS="$*" train $n /tmp/r-$n xl $w $st $((32 * w)) 20 --fresh; }
r32 s32 1 single $N
r32 z32 4 zero1 $N
r32 z32-ceg 4 zero1 $N COMM_CE_GATHER=1
r32 d32 4 bucketed:25 $N
r32 d32-early 4 bucketed:25 $N COMM_CE_GATHER=1 DDP_SPLIT_EARLY=1
echo "runs done: $(el) s"
trace() { # OUTDIR BATCH STRATEGIES [ENV...]
  local o=$1 b=$2 s=$3; shift 3
  env "$@" LD_LIBRARY_PATH="$PWD/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CUPTI_TRACE_KERNELS_ONLY=1 TRACE_KEEP=1 TRACE_BATCH=$b TRACE_WORLD=4 \
    TRACE_STRATEGIES="$s" OUT=$o timeout 150 bash run.sh trace 2>&1 | grep -v "^\[rank" | grep -i "fail\|error" | cut -c1-160 | head -4
  for f in $o/trace-*.csv.gz; do python3 phases.py $f; done; pack
}
[ $(el) -lt 400 ] && trace $R/k 8 "single zero1 bucketed:25"
cp $R/k/trace-zero1-a1.csv.gz $O/z8.csv.gz 2>/dev/null; cp $R/k/trace-single-a1.csv.gz $O/s8.csv.gz 2>/dev/null
echo "elapsed $(el) s"
[ $(el) -lt 480 ] && trace $R/kc 8 "zero1" COMM_CE_GATHER=1
rm -f $R/k*/trace-*.csv.gz; pack; echo "done $(date -u +%T), $(el) s"

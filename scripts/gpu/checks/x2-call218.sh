#!/usr/bin/env bash
# Session 39's 2-GPU call (nvidia-h200-x2; no 4-GPU kind was lent), about 6 minutes; W=4
# runs it at world 4 (nvidia-h200-x4, about 9 minutes; not yet run). Copy this, phases.py and
# train-runs.sh into .gpu/. The backward's kernels ahead of comm's copy-engine adds.
# prio-probe.py on one GPU (calls 215-217): with comm's grid-stride adds (528 blocks, all
# resident at once) stream priority changes nothing (12.39 against 12.37 ms); with one
# short block per 2048 elements (COMM_CE_ADDS_BLOCKS=all) the GEMMs beside the adds end
# 0.62 ms sooner once they rank above the adds (SEAM_GRAPH_COMPUTE_PRIORITY=2 raises the
# captured kernels at the lowest priority two levels; COMM_CE_ADDS_PRIORITY=1 keeps the adds'
# stream between), 0.19 ms at one priority. Expected at world 2 (the same adds) and 4, 8 rows: bucketed:25 and
# zero1 0.3-1.0 ms shorter with both (PA), about nothing with the priorities alone (P).
W=${W:-2}; CALL=call218; source "$(dirname "$0")/train-runs.sh"
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
P="SEAM_GRAPH_COMPUTE_PRIORITY=2 COMM_CE_ADDS_PRIORITY=1"; A="COMM_CE_ADDS_BLOCKS=all"
env $N $A timeout 60 bin/comm-launch --nproc-per-node $W -- bin/comm-selftest > $R/selftest.txt 2>&1; echo "selftest (all blocks) rc=$?: $(grep -h "rank 0" $R/selftest.txt | tail -1 | cut -c1-150)"
xl single1 1 single $N
xl d$W $W bucketed:25 $N
xl d$W-pa $W bucketed:25 $N $P $A
grep -h "priority levels" $R/d$W-pa.txt | sort | uniq -c | cut -c1-130
xl d$W-a $W bucketed:25 $N $A
xl d$W-p $W bucketed:25 $N $P
xl z$W $W zero1 $N
xl z$W-pa $W zero1 $N $P $A
xl z$W-a $W zero1 $N $A
xl z$W-p $W zero1 $N $P
xl d${W}b $W bucketed:25 $N
xl d$W-pab $W bucketed:25 $N $P $A
same d$W d$W-p; same z$W z$W-p; same d$W d$W-pa; same z$W z$W-pa
r32() { local n=$1 w=$2 st=$3; shift 3; ENVS="$*" train $n /tmp/r-$n xl $w $st $((32 * w)) 20 --fresh; }
[ $(el) -lt 360 ] && { r32 s32 1 single $N; r32 d${W}x32 $W bucketed:25 $N; r32 d${W}x32-pa $W bucketed:25 $N $P $A; r32 z${W}x32 $W zero1 $N; r32 z${W}x32-pa $W zero1 $N $P $A; }
echo "runs done: $(el) s"
trace() { # OUTDIR BATCH STRATEGIES [ENV...]
  local o=$1 b=$2 s=$3; shift 3
  env "$@" LD_LIBRARY_PATH="$PWD/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CUPTI_TRACE_KERNELS_ONLY=1 TRACE_KEEP=1 TRACE_BATCH=$b TRACE_WORLD=$W \
    TRACE_STRATEGIES="$s" OUT=$o timeout 100 bash run.sh trace 2>&1 | grep -v "^\[rank" | grep -i "fail\|error" | cut -c1-160 | head -4
  for f in $o/trace-*.csv.gz; do python3 phases.py $f; done; pack
}
[ $(el) -lt 470 ] && trace $R/kpa 8 "bucketed:25 zero1" $P $A
rm -f $R/k*/trace-*.csv.gz; pack; echo "done $(date -u +%T), $(el) s"

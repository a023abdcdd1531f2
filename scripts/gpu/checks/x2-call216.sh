#!/usr/bin/env bash
# Session 39's 2-GPU call (nvidia-h200-x2; no 4-GPU kind was lent), about 8 minutes. Copy this, phases.py and
# train-runs.sh into .gpu/. The compute kernels of the captured step above comm's adds:
# SEAM_GRAPH_COMPUTE_PRIORITY=2 raises every kernel node captured at the lowest priority
# (candle's stream) two levels; COMM_CE_ADDS_PRIORITY=1 puts the copy-engine adds' stream
# one level above the lowest, so that it stays below them (NCCL's stream stays highest).
# Session 38 (call 205) found 1.3-1.5 ms of gaps in the world-4 backward (world 2 has the same adds), all while the adds
# held the SMs. Expected: bucketed:25 and zero1 at 8 rows 0.5-1.3 ms shorter, or the adds
# starve and the step grows at the backward's end.
CALL=call216; source "$(dirname "$0")/train-runs.sh"
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
P="SEAM_GRAPH_COMPUTE_PRIORITY=2 COMM_CE_ADDS_PRIORITY=1"
xl single1 1 single $N
xl single1-p 1 single $N $P
grep -h "priority levels" $R/single1-p.txt | head -2 | cut -c10-120
xl d2 2 bucketed:25 $N
xl d2-p 2 bucketed:25 $N $P
grep -h "priority levels" $R/d2-p.txt | sort | uniq -c | cut -c1-130
xl z2 2 zero1 $N
xl z2-p 2 zero1 $N $P
# The compute kernels at NCCL's level too: NCCL's blocks no longer go first.
xl d2-p5 2 bucketed:25 $N SEAM_GRAPH_COMPUTE_PRIORITY=5 COMM_CE_ADDS_PRIORITY=1
xl z2-p5 2 zero1 $N SEAM_GRAPH_COMPUTE_PRIORITY=5 COMM_CE_ADDS_PRIORITY=1
same z2 z2-p; same d2 d2-p
r32() { local n=$1 w=$2 st=$3; shift 3; ENVS="$*" train $n /tmp/r-$n xl $w $st $((32 * w)) 20 --fresh; }
[ $(el) -lt 330 ] && { r32 s32 1 single $N; r32 d2x32 2 bucketed:25 $N; r32 d2x32-p 2 bucketed:25 $N $P; r32 z2x32 2 zero1 $N; r32 z2x32-p 2 zero1 $N $P; }
echo "runs done: $(el) s"
trace() { # OUTDIR BATCH STRATEGIES [ENV...]
  local o=$1 b=$2 s=$3; shift 3
  env "$@" LD_LIBRARY_PATH="$PWD/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CUPTI_TRACE_KERNELS_ONLY=1 TRACE_KEEP=1 TRACE_BATCH=$b TRACE_WORLD=2 \
    TRACE_STRATEGIES="$s" OUT=$o timeout 120 bash run.sh trace 2>&1 | grep -v "^\[rank" | grep -i "fail\|error" | cut -c1-160 | head -4
  for f in $o/trace-*.csv.gz; do python3 phases.py $f; done; pack
}
[ $(el) -lt 450 ] && trace $R/kp 8 "bucketed:25 zero1" $P
rm -f $R/k*/trace-*.csv.gz; pack; echo "done $(date -u +%T), $(el) s"

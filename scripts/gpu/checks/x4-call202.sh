#!/usr/bin/env bash
# Session 37, call 202: FOUR GPUs, from the packed folder (copy this, replays.py and
# train-runs.sh into .gpu/). About 7 minutes. ddp::tail's default: ZeRO-1's last bucket by
# NCCL's kernels on a second stream at world 4 (that build's default; not kept), against
# DDP_TAIL_STAGES=0, twice each, 8 and 32 rows; at world 2 asked for (DDP_TAIL_STAGES=1);
# eager against replayed at world 4. Then CUPTI timelines of split DDP at world 4, 8 rows,
# without and with its last 7 stages beside (call 201: 0.3 ms slower, not faster): where
# the backward, the copy engines' last adds and NCCL's reduce-scatters end.
CALL=c202; source "$(dirname "$0")/train-runs.sh"
H="$(pwd)"
e() { local n=$1 w=$2 st=$3; shift 3; ENVS="$N $*" train $n /tmp/r-$n xl $w $st $((8 * w)) 12 --fresh --eager; }
log() { echo "$1: $(grep -h 'ddp norm' "$R/$1.txt" | sed 's/^\[rank [0-9]*\] //' | sort | uniq -c | tr -s ' ' | head -2 | tr '\n' ';')"; }
xl single1 1 single $N
xl z4 4 zero1 $N DDP_NORM_LOG=1; log z4
xl z4-t0 4 zero1 $N DDP_TAIL_STAGES=0
xl z4b 4 zero1 $N
xl z4-t0b 4 zero1 $N DDP_TAIL_STAGES=0
xl z2 2 zero1 $N
xl z2-t1 2 zero1 $N DDP_TAIL_STAGES=1
e z4e 4 zero1
same z4 z4e; same z4 z4-t0
export TMO=75
train single32 /tmp/r-s32 xl 1 single 32 16 --fresh
ENVS="$N" train z4s32 /tmp/r-z4s32 xl 4 zero1 128 16 --fresh
ENVS="$N DDP_TAIL_STAGES=0" train z4s32-t0 /tmp/r-z4s32-t0 xl 4 zero1 128 16 --fresh
for k in 0 7; do
  env LD_LIBRARY_PATH="$PWD/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" DDP_TAIL_STAGES=$k TRACE_KEEP=1 TRACE_BATCH=8 TRACE_WORLD=4 \
    TRACE_STRATEGIES=bucketed:25 OUT=$R/t$k timeout 120 bash run.sh trace 2>&1 | grep -v "^\[rank" | grep -i "period\|fail\|error" | head -4
  python3 replays.py $R/t$k/trace-bucketed-a1.csv.gz | grep "^0 " | head -4
  pack
done
echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Session 37, call 201: FOUR GPUs, from the packed folder (copy this and train-runs.sh into
# .gpu/). About 7 minutes. ddp::tail: the reduce-scatters launched at the model's first K
# stages (the backward's last) by NCCL's kernels on a second stream, beside the copy
# engines' backlog (`DDP_TAIL_STAGES=K`), with `DDP_NORM_LOG=1` saying per rank where each
# norm came from; comm-selftest at world 4 (the conformance suite, with a deferred
# reduce-scatter beside the others); eager against replayed at world 4.
CALL=c201; source "$(dirname "$0")/train-runs.sh"
e() { local n=$1 w=$2 st=$3; shift 3; ENVS="$N $*" train $n /tmp/r-$n xl $w $st $((8 * w)) 12 --fresh --eager; }
log() { echo "$1: $(grep -h 'ddp norm' "$R/$1.txt" | sed 's/^\[rank [0-9]*\] //' | sort | uniq -c | tr -s ' ' | head -4 | tr '\n' ';')"; }
env $N timeout 90 bin/comm-launch --nproc-per-node 4 -- bin/comm-selftest > "$R/selftest-w4.txt" 2>&1
echo "selftest world 4: rc $?"; grep -h "rank 0/" "$R/selftest-w4.txt" | tail -2; grep -hi "error\|fail" "$R/selftest-w4.txt" | head -3
xl single1 1 single $N
xl d4 4 bucketed:25 $N
for k in 4 7 10; do xl d4-t$k 4 bucketed:25 $N DDP_TAIL_STAGES=$k DDP_NORM_LOG=1; log d4-t$k; done
xl z4 4 zero1 $N
for k in 1 8; do xl z4-t$k 4 zero1 $N DDP_TAIL_STAGES=$k DDP_NORM_LOG=1; log z4-t$k; done
e d4-t7e 4 bucketed:25 DDP_TAIL_STAGES=7
same d4-t7 d4-t7e; same d4 d4-t7
xl d4b 4 bucketed:25 $N
export TMO=75
train single32 /tmp/r-s32 xl 1 single 32 16 --fresh
ENVS="$N" train d4s32 /tmp/r-d4s32 xl 4 bucketed:25 128 16 --fresh
ENVS="$N DDP_TAIL_STAGES=7" train d4s32-t7 /tmp/r-d4s32-t7 xl 4 bucketed:25 128 16 --fresh
echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Not yet run (written in session 31). FOUR GPUs, best nvidia-h100-x4, from the packed folder
# (copy this and train-runs.sh into .gpu/; .gpu/nccl holds NCCL 2.28.9, which $N loads).
# About 5 minutes. Run it beside the report (report-x4-call168.sh, report-x4-next-b.sh).
# 1. zero1 at world 4 with the copy-engine reduce-scatters (the default): 12 eager steps against
#    the replayed graph, bit for bit (run at world 2 only so far, call 167).
# 2. Session 25's world-2 recipe took zero1 to 0.939x one GPU on top of them (call 166,
#    nvidia-h200-x4): its four settings apart, at worlds 2 and 4.
CALL=cer-next; source "$(dirname "$0")/train-runs.sh"; export TMO=60
xl single 1 single
xl zero1-w4 4 zero1 $N
ENVS="$N" train zero1-w4-eager /tmp/r-zero1-w4-eager xl 4 zero1 32 12 --fresh --eager
same zero1-w4 zero1-w4-eager
for w in 2 4; do
  [ $w = 2 ] && xl zero1-w2 2 zero1 $N
  xl zero1-w$w-s25 $w zero1 $N COMM_CE_GATHER=0 NCCL_CTA_POLICY=2 NCCL_MIN_CTAS=32 ZERO1_PARAM_GATHER=adamw:4
  xl zero1-w$w-cta2 $w zero1 $N COMM_CE_GATHER=0 NCCL_CTA_POLICY=2
  xl zero1-w$w-cta2-k4 $w zero1 $N COMM_CE_GATHER=0 NCCL_CTA_POLICY=2 ZERO1_PARAM_GATHER=adamw:4
  xl zero1-w$w-c32 $w zero1 $N NCCL_MIN_CTAS=32
done
xl single-b 1 single
pack
echo "done $(date -u +%T)"

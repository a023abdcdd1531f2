#!/usr/bin/env bash
# Not yet run (written in session 30). FOUR GPUs, nvidia-h100-x4 (the kind the bars name), from
# the packed folder (copy this, report-x4-next-b.sh and train-runs.sh into .gpu/; .gpu/nccl
# holds NCCL 2.28.9). About 9 minutes.
# 1. The H100 report's second half (report-x4-next-b.sh: 32 x 128 tokens a GPU, PyTorch at
#    world 1), into $OUT/c beside call 165's first half (docs/results/report-h100x4-s30).
# 2. zero1 at world 2 is 0.953x on H100 (call 165), 0.003 from its bar: session 25's recipe
#    (NCCL's copy-engine gathers, 4 beside AdamW, at least 32 NCCL CTAs) took 0.965x
#    against 0.987x on H200 (call 160) and never ran on H100; with our own copy-engine
#    gathers (COMM_CE_GATHER=1) beside it. At world 4 the same settings against 0.876x.
bash "$(dirname "$0")/report-x4-next-b.sh"
CALL=h100-next; source "$(dirname "$0")/train-runs.sh"; export TMO=60
xl single 1 single
for w in 2 4; do
  xl zero1-w$w $w zero1 $N
  xl zero1-w$w-nce-c32-k4 $w zero1 $N NCCL_CTA_POLICY=2 NCCL_MIN_CTAS=32 ZERO1_PARAM_GATHER=adamw:4
  xl zero1-w$w-ce-c32-k4 $w zero1 $N COMM_CE_GATHER=1 NCCL_MIN_CTAS=32 ZERO1_PARAM_GATHER=adamw:4
  xl zero1-w$w-ce-k4 $w zero1 $N COMM_CE_GATHER=1 ZERO1_PARAM_GATHER=adamw:4
  xl zero1-w$w-c32 $w zero1 $N NCCL_MIN_CTAS=32
  xl zero1-w$w-b $w zero1 $N
done
pack
# At most 8 files come back from $OUT: the report's folder as one archive.
O="${OUT:-/tmp/out}"; tar czf "$O/c.tgz" -C "$O" c && rm -rf "$O/c"

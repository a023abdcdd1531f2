#!/usr/bin/env bash
# Not yet run (written in session 30). FOUR GPUs, nvidia-h100-x4 (the kind the bars name), from
# the packed folder (copy this, report-x4-next-b.sh and train-runs.sh into .gpu/; .gpu/nccl
# holds NCCL 2.28.9). About 12 minutes.
# 1. The H100 report's second half (report-x4-next-b.sh: 32 x 128 tokens a GPU, PyTorch at
#    world 1), into $OUT/c beside call 165's first half (docs/results/report-h100x4-s30).
# 2. zero1 at world 2 is 0.953x on H100 (call 165), 0.003 from its bar: session 25's recipe
#    (NCCL's copy-engine gathers, 4 beside AdamW, at least 32 NCCL CTAs) took 0.965x
#    against 0.987x on H200 (call 160) and never ran on H100; with our own copy-engine
#    gathers (COMM_CE_GATHER=1) beside it. At world 4 the same settings against 0.876x.
# 3. Our copy-engine gathers became the default at world 2 after call 165 without running in
#    that build: the conformance suite at worlds 2 and 4, and zero1 and fsdp at world 2 with
#    the default against COMM_CE_GATHER=0, their losses compared bit for bit.
bash "$(dirname "$0")/report-x4-next-b.sh"
CALL=h100-next; source "$(dirname "$0")/train-runs.sh"; export TMO=60
echo "--- selftest, world 4 then 2 ($(date -u +%T))"
COMM_CE_GATHER=1 bash run.sh selftest 2>&1 | grep "rank 0/" | tail -2
env $N bin/comm-launch --nproc-per-node 2 -- bin/comm-selftest 2>&1 | grep "rank 0/" | tail -2
xl single 1 single
xl zero1-w2-nccl 2 zero1 $N COMM_CE_GATHER=0
xl fsdp-w2 2 fsdp $N
xl fsdp-w2-nccl 2 fsdp $N COMM_CE_GATHER=0
same fsdp-w2 fsdp-w2-nccl
for w in 2 4; do
  xl zero1-w$w $w zero1 $N
  [ $w = 2 ] && same zero1-w2 zero1-w2-nccl
  xl zero1-w$w-nce-c32-k4 $w zero1 $N COMM_CE_GATHER=0 NCCL_CTA_POLICY=2 NCCL_MIN_CTAS=32 ZERO1_PARAM_GATHER=adamw:4
  xl zero1-w$w-ce-c32-k4 $w zero1 $N COMM_CE_GATHER=1 NCCL_MIN_CTAS=32 ZERO1_PARAM_GATHER=adamw:4
  xl zero1-w$w-ce-k4 $w zero1 $N COMM_CE_GATHER=1 ZERO1_PARAM_GATHER=adamw:4
  xl zero1-w$w-c32 $w zero1 $N NCCL_MIN_CTAS=32
  xl zero1-w$w-b $w zero1 $N
done
# zero1 at world 4 is 1.2 ms from its bar on H100: its bucket size (400 MB, chosen at world 2
# in calls 71-74) and gather split (ceil(buckets / world) beside AdamW, chosen on H200) were
# never tuned there.
xl zero1-w4-mb200 4 zero1:200 $N
xl zero1-w4-mb800 4 zero1:800 $N
xl zero1-w4-k2 4 zero1 $N ZERO1_PARAM_GATHER=adamw:2
xl zero1-w4-k6 4 zero1 $N ZERO1_PARAM_GATHER=adamw:6
xl zero1-w4-c 4 zero1 $N
pack
# At most 8 files come back from $OUT: the report's folder as one archive.
O="${OUT:-/tmp/out}"; tar czf "$O/c.tgz" -C "$O" c && rm -rf "$O/c"

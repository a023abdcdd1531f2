#!/usr/bin/env bash
# Session 57, call 323 (nvidia-h200-x2): ZeRO-1's last bucket apart. Call 320's zero1
# timeline (world 2) idled 0.38-0.55 ms after the backward: the last 400 MB bucket (the
# model's first blocks and the embedding) becomes ready only when the backward's last stage
# has run, so all of its reduce-scatter is the tail. DDP_LAST_BUCKET_MB=M puts the last
# bucket's first stages, up to M MiB, in a bucket of their own, launched last (xl's block 0
# and embedding take about 60 MiB of bf16 gradients; 11 buckets then, 5 of them gathered
# beside AdamW by default). xl bf16 zero1, world 2, 8 x 128 a GPU, clipping at 1.0, 20
# steps, one GEMM table (a world-1 run first), interleaved, two runs each: off, M = 64, 128.
# Written before: M = 64 takes 0.2-0.4 ms off the step; the runs of one M are bit for bit
# equal (across M the norm's slots group the parts otherwise: its last bits may move).
CALL=c323; TABLE_ONLY=; source "$(dirname "$0")/train-runs.sh"
xl t-1 1 single $N
for k in 1 2; do
  xl "z-$k" 2 zero1 $N
  xl "l64-$k" 2 zero1 $N DDP_LAST_BUCKET_MB=64
  xl "l128-$k" 2 zero1 $N DDP_LAST_BUCKET_MB=128
done
same z-1 z-2 0; same z-1 l64-1 0; same l64-1 l64-2 0
pack; echo "done $(date -u +%T)"

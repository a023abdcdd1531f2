#!/usr/bin/env bash
# Session 57, call 324 (nvidia-h200-x2): ZeRO-1 with the model's first stages apart. Call 323
# showed DDP_LAST_BUCKET_MB=64 leaving xl's plan as it was (the last bucket held its stages
# within 64 MiB; the bits equal), while the bucket before it still held the rest of block
# 0, so it became ready only when the backward's last block had run. Now last_apart takes
# the first stages up to M MiB out of whichever buckets hold them: with M = 64 the
# embedding and block 0 (about 61 MiB) are launched last, alone, and the bucket before is
# ready a block earlier. xl bf16 zero1, world 2, 8 x 128 a GPU, clipping at 1.0, 20 steps,
# one GEMM table (a world-1 run first), interleaved, three runs each: off and M = 64.
# Written before: M = 64 takes 0.2-0.4 ms off the step (the tail after the backward,
# 0.38-0.55 ms in call 320, to about a third).
CALL=c324; TABLE_ONLY=; source "$(dirname "$0")/train-runs.sh"
xl t-1 1 single $N
for k in 1 2 3; do
  xl "z-$k" 2 zero1 $N
  xl "l64-$k" 2 zero1 $N DDP_LAST_BUCKET_MB=64
done
same z-1 z-2 0; same z-1 l64-1 0; same l64-1 l64-2 0
pack; echo "done $(date -u +%T)"

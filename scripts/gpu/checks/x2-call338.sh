#!/usr/bin/env bash
# Session 59, call 338 (nvidia-h200-x2): issue 47's world-2 rows with the grouped AdamW
# (seam::fused_adamw::group; ZeRO-1 a bucket's spans a group), NCCL 2.28.9: xl bf16, 8 x 128
# a GPU, clipping at 1.0, one GEMM table (tuned by `train run` single first), twice each:
# `bench single --clip 1`, `train run` single, zero1 and bucketed:25 at world 2.
# Written before: single 0.6-0.9 ms shorter than call 329's (call 333), zero1 about 0.45
# shorter (as at world 1, call 334: what goes is the launches' tails, not bytes), DDP about
# as much as single (its buckets gathered in the backward are updated as one group at world
# 2); so zero1's ratio up by about 0.005 (0.931 -> ~0.936), DDP's within its spread
# (1.05-1.09).
CALL=c338; TABLE_ONLY=; source "$(dirname "$0")/train-runs.sh"
eval "export $N"
xl t-1 1 single
rows2 2
pack; echo "done $(date -u +%T)"

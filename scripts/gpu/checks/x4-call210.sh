#!/usr/bin/env bash
# Session 38, call 210 (nvidia-h200-x4), about 3 minutes. Copy this and train-runs.sh into
# .gpu/. Split DDP's AdamW at world 4 runs 1.9 ms longer beside 15.3 ms of NCCL's
# all-gather kernels (call 205): fewer CTAs for them (NCCL_MAX_CTAS), since AdamW leaves
# them time. zero1 with 8 CTAs too.
CALL=call210; source "$(dirname "$0")/train-runs.sh"
xl single1 1 single $N
xl d4 4 bucketed:25 $N
for c in 4 8 16; do xl d4-c$c 4 bucketed:25 $N NCCL_MAX_CTAS=$c; done
xl z4 4 zero1 $N
xl z4-c8 4 zero1 $N NCCL_MAX_CTAS=8
pack; echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Session 54, call 299 (nvidia-h200-x2): issue 47's world-2 rows after AdamW's uncapped grid,
# on NCCL 2.28.9 (the packed nccl/, as the committed world-2 figures; call 297 had the
# device's 2.28.3): xl bf16, 8 x 128 a GPU, single, bucketed:25 and zero1 at world 2, with the
# new binaries and the old (old/bin: the cap of 2,112 blocks), interleaved.
# Copy into .gpu/ with train-runs.sh and old/bin. Output: $OUT/c299.tgz.
CALL=c299; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"
for v in new old new2; do use ${v%2}
  xl "single-$v" 1 single $N
  xl "d2-$v" 2 bucketed:25 $N
  xl "z2-$v" 2 zero1 $N
done; use new
grep -h "NCCL 2" "$R/z2-new.txt" | head -2 | cut -c1-200
pack; echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Session 54, call 301 (nvidia-h200-x2, NCCL 2.28.9 packed): the RMSNorm backward's rule
# (the wide kernel below 1,584 rows too; call 300: xl at 8 x 128 41.32 -> 40.99 ms with it
# forced) as committed:
#   1. bench model-check (every rms_norm row of fewer than 1,584 rows now through it);
#   2. train run xl bf16, 8 x 128, the default against MODEL_NORM_BWD=one (the old rule's
#      kernel at these rows), interleaved;
#   3. bucketed:25 and zero1 at world 2 with the default, against 2's single runs.
# Copy into .gpu/ with train-runs.sh. Output: $OUT/c301.tgz.
CALL=c301; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"
timeout 240 bin/bench model-check > "$R/model-check.txt" 2>&1; echo "model-check rc=$?"
grep -i "rms_norm\|FAIL" "$R/model-check.txt" | head -12; grep -c ": OK" "$R/model-check.txt"
for k in 1 2; do xl "new-$k" 1 single $N; xl "one-$k" 1 single $N MODEL_NORM_BWD=one; done
xl d2 2 bucketed:25 $N
xl z2 2 zero1 $N
pack; echo "done $(date -u +%T)"

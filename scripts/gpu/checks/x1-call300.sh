#!/usr/bin/env bash
# Session 54, call 300 (nvidia-h200): the RMSNorm backward's wide kernel (rmsnorm_bwd_w, a
# row to a block of four warps, the ∂w sums in registers) at xl's 1,600 columns, where the
# columns choose rmsnorm_bwd_v (a warp a row) unless MODEL_NORM_BWD=wide. Call 298's trace:
# rmsnorm_bwd_v_add 1.31 ms a step in 96 launches at 1,024 rows (13.6 us, about 1 TB/s).
#   1. bench model-check with MODEL_NORM_BWD=wide (every rms_norm row through it);
#   2. train run xl bf16, 8 x 128, default and wide interleaved, then 8 x 1024;
#   3. the kernel tracer on both at 8 x 128 (the norm's kernels a replay).
# Copy into .gpu/ with train-runs.sh and cupti/. Output: $OUT/c300.tgz.
CALL=c300; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"
MODEL_NORM_BWD=wide timeout 240 bin/bench model-check > "$R/model-check-wide.txt" 2>&1; echo "model-check wide rc=$?"
grep -i "rms\|FAIL\|pass" "$R/model-check-wide.txt" | head -12
for k in 1 2; do xl "one-$k" 1 single; xl "wide-$k" 1 single MODEL_NORM_BWD=wide; done
for v in one wide; do
  ENVS="MODEL_NORM_BWD=$v" TMO=150 train "k1-$v" /tmp/r-k xl 1 single 8 14 --fresh --context 1024 > /dev/null; rm -rf /tmp/r-k
  echo "xl 8x1024 $v: $(msc k1-$v 8 1024) ms"; done
trace1 t-one xl 128 | grep -i "rmsnorm\|colsum\|period" | head -6
MODEL_NORM_BWD=wide trace1 t-wide xl 128 | grep -i "rmsnorm\|colsum\|period" | head -6
pack; echo "done $(date -u +%T)"

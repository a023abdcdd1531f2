#!/usr/bin/env bash
# Session 51, call 283 (nvidia-h200): flash::advance (7d52f31) on the device, and the eager
# pool's physical mark beside the captured graph's.
#   bench model-check (tiled rows; each backward twice, the same bits); small, 256 tokens,
#   captured against eager: the same bits;
#   the 6.7B at 8 x 1024, --eager and captured: the peak line now gives the pool's reserved
#   mark beside its bytes in use (call 282: captured 129.05 GiB, the graph's own 44.50 against
#   33.66 live at once in capture order; eager 118.20, the pool's mark).
# Copy into .gpu/ with train-runs.sh. Output: $OUT/c283.tgz.
CALL=c283; TABLE_ONLY=6.7B; source "$(dirname "$0")/train-runs.sh"; export TMO=200
modelcheck "tiled\|fail\|error\|panick\|differ"
TABLE_ONLY=small capeager small 256
for a in eager captured; do x=""; [ $a = eager ] && x=--eager
  train big8-$a /tmp/r-b 6.7B 1 single 8 12 --fresh --context 1024 $x > /dev/null; rm -rf /tmp/r-b
  echo "6.7B 8x1024 $a: $(msc big8-$a 8 1024) ms"; grep -h "peak GPU" "$R/big8-$a.txt" | cut -c1-400
  grep -h "step: one CUDA graph" "$R/big8-$a.txt" | cut -c1-240
done
pack; echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Session 54, call 298 (nvidia-h200): AdamW without a cap on its grid, third look.
#   1. `bench adamw` beside PyTorch's fused AdamW (anchors/adamw_torch.py) in one call, xl
#      and the 6.7B;
#   2. the kernel tracer on `train run` xl at 8 x 128 with the old binaries (old/bin: the cap
#      of 2,112 blocks) and the new: AdamW's kernels a replay (call 297: the step 41.44 ->
#      40.88 ms, where the bench's per-tensor update went 16.43 -> 15.40);
#   3. the 6.7B at 8 x 1024 on one GPU, captured, old and new (call 294: 587.13 ms).
# Copy into .gpu/ with train-runs.sh, old/bin, cupti/, anchors/ (torch_best.py,
# adamw_torch.py). Output: $OUT/c298.tgz.
CALL=c298; TABLE_ONLY=none; source "$(dirname "$0")/train-runs.sh"
for s in xl 6.7B; do
  timeout 150 bin/bench adamw --size $s --iters 20 --out "$R/adamw.jsonl" > "$R/adamw-$s.txt" 2>&1; echo "== bench adamw $s rc=$?"; cat "$R/adamw-$s.txt"
  (cd anchors && timeout 150 python3 adamw_torch.py $s 20) 2>&1 | tail -1 | tee -a "$R/torch-adamw.jsonl"; pack
done
use old; trace1 xl128-old xl 128 | grep -i "adamw\|period\|peak" | head -8; use new
trace1 xl128-new xl 128 | grep -i "adamw\|period\|peak" | head -8
for v in old new; do use $v
  TMO=200 train big-$v /tmp/r-b 6.7B 1 single 8 12 --fresh --context 1024 > /dev/null; rm -rf /tmp/r-b
  echo "6.7B 8x1024 $v: $(msc big-$v 8 1024) ms; $(peak big-$v)"; done; use new
same big-old big-new 0
pack; echo "done $(date -u +%T)"

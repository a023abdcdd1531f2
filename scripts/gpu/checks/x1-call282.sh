#!/usr/bin/env bash
# Session 51, call 282 (nvidia-h200): where the captured step's memory goes, and the 6.7B
# beside PyTorch with the session's kernels.
#   the 6.7B at 8 x 1024, captured: its step line now names the graph's allocation nodes
#   (the most bytes live at once in capture order) beside the peak line's graph memory
#   (call 281: 609.47 ms, 129.05 GiB; --eager 118.39 in call 280);
#   the same --eager, and PyTorch compile-blocks (call 277: 636.67 ms, 126.76 GiB);
#   xl at 8 x 128 captured: the same two figures at the default shape.
# Copy into .gpu/ with train-runs.sh. Output: $OUT/c282.tgz.
CALL=c282; TABLE_ONLY=6.7B; source "$(dirname "$0")/train-runs.sh"; export TMO=200
train big8 /tmp/r-b 6.7B 1 single 8 12 --fresh --context 1024 > /dev/null; rm -rf /tmp/r-b
echo "6.7B 8x1024 captured: $(msc big8 8 1024) ms; $(peak big8)"; grep -h "step: one CUDA graph" "$R/big8.txt" | cut -c1-300
train big8-eager /tmp/r-b 6.7B 1 single 8 12 --fresh --context 1024 --eager > /dev/null; rm -rf /tmp/r-b
echo "6.7B 8x1024 --eager: $(msc big8-eager 8 1024) ms; $(peak big8-eager)"
xl xl128 1 single > /dev/null; grep -h "peak GPU\|step: one CUDA graph" "$R/xl128.txt" | cut -c1-300
TV=compile-blocks torchc 6.7B 1024
pack; echo "done $(date -u +%T)"

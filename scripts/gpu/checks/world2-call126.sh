#!/usr/bin/env bash
# Call 126 (session 24), two GPUs, from the packed folder (copy this and train-runs.sh into
# .gpu/): issue 48's world-2 bar with the memsets spliced as kernels (call 125's build):
# --accum 4 over --accum 1 with bucketed:25 and zero1 at world 2, against the same ratio of
# single at world 1 (within 5 %). 15 steps each (median from step 6), as little device time
# was left.
CALL=call126
source "$(dirname "$0")/train-runs.sh"
for st in single bucketed:25 zero1; do
  w=2; [ $st = single ] && w=1
  for a in 1 4; do TMO=60 train ${st%%:*}-w$w-a$a /tmp/r-$a xl $w $st $((8 * w * a)) 15 --accum $a --fresh; done
done
ratios single-w1:8 bucketed-w2:16 zero1-w2:16
pack

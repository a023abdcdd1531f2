#!/usr/bin/env bash
# Call 127 (session 24's plan for the next session; not run: no device time left), two
# GPUs, from the packed folder (copy this and train-runs.sh into .gpu/). Call 126 found
# zero1 at world 2 taking 3.417x its --accum 1 step at --accum 4 (+7.6 % over world 1's
# ratio; issue 48's bar is 5 %); bucketed:25 3.088x (-2.7 %). Both --accum 4 steps were about
# 15 ms over 3 no-sync micro-batches + their --accum 1 step. Since then the last
# micro-batch's f32 sums go out as bf16 in one pass (seam::accum::sum_new_as: 8 bytes a
# parameter where the sum in place and the cast moved 16), and zero1's first micro-batch no
# longer waits for the whole all-gather before its forward (it waited per stage only in a
# synced micro-batch). Expected at xl: bucketed --accum 4 about 3 ms shorter, zero1's
# several ms more (the gather of 3.1 GB of bf16 hidden behind the forward). Then model-check (its accum check covers the new
# kernel, bit for bit against the sum then the cast), and traces of zero1 at world 2,
# --accum 4 and 1, to account for the rest.
CALL=call127
source "$(dirname "$0")/train-runs.sh"
timeout 200 bin/bench model-check > "$R/model-check.txt" 2>&1; echo "model-check rc $?: $(grep -c ': OK' "$R/model-check.txt") OK"
grep -E "accum|rror" "$R/model-check.txt" | head -3
for st in single bucketed:25 zero1; do
  w=2; [ $st = single ] && w=1
  for a in 1 4; do TMO=60 train ${st%%:*}-w$w-a$a /tmp/r-$a xl $w $st $((8 * w * a)) 20 --accum $a --fresh; done
done
ratios single-w1:8 bucketed-w2:16 zero1-w2:16
pack
# Issue 47 (session 25): profile-x2.md found DDP's GEMMs 7 ms slower beside NCCL's kernels.
# cuBLASLt's persistent kernels launch one CTA a SM; with NCCL holding some SMs, the last
# CTAs run as a second wave. MODEL_GEMM_SM_TARGET plans every GEMM for fewer SMs (cuBLASLt's
# SM count target). Each run tunes its own GEMMs (the table's indices are for 132 SMs).
for sm in 116 100; do
  TABLE_ONLY=none ENVS="MODEL_GEMM_SM_TARGET=$sm" TMO=60 train single-w1-sm$sm /tmp/r-s xl 1 single 8 20 --fresh
  for st in bucketed:25 zero1; do
    TABLE_ONLY=none ENVS="MODEL_GEMM_SM_TARGET=$sm" TMO=60 train ${st%%:*}-w2-sm$sm /tmp/r-s xl 2 $st 16 20 --fresh
  done
done
TABLE_ONLY=none TMO=60 train bucketed-w2-tuned /tmp/r-s xl 2 bucketed:25 16 20 --fresh
for a in 4 1; do
  TRACE_STRATEGIES=zero1 TRACE_WORLD=2 TRACE_ACCUM=$a OUT=$R bash run.sh trace > "$R/trace-job-a$a.txt" 2>&1 || echo "trace accum $a failed"
done
traces
pack

#!/usr/bin/env bash
# Session 46, call 248 (a 2-GPU kind): ZeRO-2 and FSDP (released gradients) receive each
# in-place gradient's chunk into a buffer of its own, instead of reduce-scattering in place
# and copying the chunk out (at world 1: the whole gradient). Copy into .gpu/ with
# train-runs.sh, nccl/ and train-old.gz (the binary before the change).
#   xl bf16, 8 x 128 tokens a GPU, 20 steps: zero1 (the baseline), zero2 and fsdp at worlds
#   1 and 2, zero2 and fsdp by both binaries, alternating; then whether each pair logged the
#   same losses and norms, bit for bit.
# Output: $OUT/call248.tgz (call 248 itself ran with CALL set for the source alone, so its
# packs were empty; /tmp/call248 was tarred by a second command); a table last.
CALL=call248; source "$(dirname "$0")/train-runs.sh"
gunzip -kf train-old.gz && chmod +x train-old && cp bin/train train-new
use() { cp "train-$1" bin/train; }
use new; xl z1-w1 1 zero1 $N
for w in 1 2; do
  [ $w = 2 ] && { use new; xl z1-w2 2 zero1 $N; }
  for st in zero2 fsdp; do
    use new; xl $st-w$w-new $w $st $N
    use old; xl $st-w$w-old $w $st $N
  done
done
use new
for w in 1 2; do
  for st in zero2 fsdp; do echo "$st w$w new = old: $(same $st-w$w-new $st-w$w-old)"; done
  echo "zero2 w$w = zero1: $(same zero2-w$w-new z1-w$w)"
done
pack

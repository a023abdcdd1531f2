#!/usr/bin/env bash
# Session 46, call 249 (a 2-GPU kind): ZeRO-2 and FSDP reduce-scatter by comm's copy
# engines (deferred launches, collected two stages later) instead of NCCL's kernels during
# the backward. Copy into .gpu/ with train-runs.sh, nccl/ and train-old.gz (4afedf2's
# binary: NCCL's kernels, chunks received into their own buffers).
#   xl bf16, 8 x 128 tokens a GPU, 20 steps, world 2: zero1, zero1 with its norm from the
#   parts (DDP_SUMSQ=0, as zero2 takes it), zero2 and fsdp by both binaries, alternating;
#   each run's step, peak and NCCL windows; which runs logged the same losses and norms.
# Output: $OUT/call249.tgz; a table last.
CALL=call249; source "$(dirname "$0")/train-runs.sh"
gunzip -kf train-old.gz && chmod +x train-old && cp bin/train train-new
use() { cp "train-$1" bin/train; }
use new; xl z1 2 zero1 $N; xl z1-parts 2 zero1 $N DDP_SUMSQ=0
for k in 1 2; do
  for st in zero2 fsdp; do
    use new; xl $st-new$k 2 $st $N
    use old; xl $st-old$k 2 $st $N
  done
done
use new
for st in zero2 fsdp; do echo "$st new = old: $(same $st-new1 $st-old1)"; done
echo "zero2 new = zero1 (norm from the parts): $(same zero2-new1 z1-parts)"
echo "zero2 new = zero1: $(same zero2-new1 z1)"
echo "fsdp new = zero2 new: $(same fsdp-new1 zero2-new1)"
for f in "$R"/*.txt; do echo "$(basename "$f" .txt): $(grep -ho '[0-9.]* GiB of them in NCCL windows' "$f" | sort -u | tr '\n' ' ')"; done
pack

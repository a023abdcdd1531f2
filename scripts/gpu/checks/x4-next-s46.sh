#!/usr/bin/env bash
# Session 46, for the next 4-GPU call (any kind with W GPUs; W = all of them): should
# ZeRO-2's and FSDP's reduce-scatters go deferred (comm's copy engines, the norm in their
# adds) at world 4 too? They do at world 2 (memplan::RELEASED_CE_WORLDS = [2]; calls
# 249-253: zero2 = zero1's step and bits, fsdp 1.8 ms and the 6.7B's 9.5 ms less); on paper
# at world 4 they lose 2.3 ms on H100's rates and gain 0.6 on H200's. Copy into .gpu/ with
# train-runs.sh and nccl/. About 5 minutes.
#   xl bf16, 8 x 128 tokens a GPU, 20 steps, world W: zero1; zero2 and fsdp with
#   DDP_RELEASE_CE=1 and 0, alternating, twice; then the 6.7B's fsdp (16 steps) with 1 and 0.
#   Each run's step, peak and NCCL windows; which runs logged zero1's losses and norms.
# Output: $OUT/x4s46.tgz; a table last. If deferred wins at world 4, add 4 to
# RELEASED_CE_WORLDS (and to memplan::time's paper, which follows it).
CALL=x4s46; source "$(dirname "$0")/train-runs.sh"; export TMO=240
W=$(nvidia-smi -L | wc -l)
xl z1 "$W" zero1 $N
for k in 1 2; do
  for st in zero2 fsdp; do
    xl "$st-ce$k" "$W" "$st" $N DDP_RELEASE_CE=1
    xl "$st-nccl$k" "$W" "$st" $N DDP_RELEASE_CE=0
  done
done
for c in 1 0; do ENVS="$N DDP_RELEASE_CE=$c" train "big-$c" "/tmp/r-big-$c" 6.7B "$W" fsdp $((8 * W)) 16 --fresh; done
echo "zero2 deferred = zero1: $(same zero2-ce1 z1)"
echo "zero2 NCCL = zero1: $(same zero2-nccl1 z1)"
echo "6.7B fsdp deferred = NCCL: $(same big-1 big-0)"
for f in "$R"/*.txt; do echo "$(basename "$f" .txt): $(grep -ho '[0-9.]* GiB of them in NCCL windows' "$f" | sort -u | tr '\n' ' ')"; done
pack

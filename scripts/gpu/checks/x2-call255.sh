#!/usr/bin/env bash
# Session 47, call 255 (nvidia-h200-x2): session 46's final binary (its review's mends,
# not run on a GPU then) and which strategy trains the 6.7B fastest on 2 GPUs.
#   1. bench zero1-check at world 2 (ZeRO-1 checkpoints on NCCL: the resume mends);
#   2. xl bf16 at world 2: zero1, zero2 (same bits as zero1, as in call 253), fsdp,
#      bucketed:25 (calls 250/253: 38.00-38.16, 38.08-38.10, 40.52, ~45);
#   3. the 6.7B at world 2, 8 x 128 tokens a GPU, 16 steps: fsdp, fsdp keeping its forward
#      gathers (FSDP_RESHARD_AFTER_FORWARD=0), zero2, zero1 (plan: 45.4, -, 56.9, 68.0 GiB);
#   4. PyTorch's FSDP2 trainer at the 6.7B, world 2 (compile-blocks, 12 steps).
# Copy into .gpu/ with train-runs.sh and nccl/. Output: $OUT/c255.tgz.
CALL=c255; source "$(dirname "$0")/train-runs.sh"; export TMO=150
t0=$(date +%s)
env $N timeout 120 bin/bench zero1-check --backend nccl --ranks 2 --dir /tmp/z1ck > "$R/zero1-check.txt" 2>&1
echo "zero1-check rc=$? ($(( $(date +%s) - t0 )) s)"; grep -ci "ok" "$R/zero1-check.txt"; tail -2 "$R/zero1-check.txt" | cut -c1-250; rm -rf /tmp/z1ck; pack
xl z1 2 zero1 $N
xl z2 2 zero2 $N
xl fsdp 2 fsdp $N
xl b25 2 bucketed:25 $N
same z2 z1
big() { local n=$1 st=$2; shift 2; ENVS="$N $*" train "$n" "/tmp/r-$n" 6.7B 2 "$st" 16 16 --fresh; }
big big-fsdp fsdp
big big-fsdp-keep fsdp FSDP_RESHARD_AFTER_FORWARD=0
big big-zero2 zero2
big big-zero1 zero1
same big-zero2 big-zero1
TTMO=200 torch 6.7B compile-blocks 12 fsdp2 2
echo "done ($(( $(date +%s) - t0 )) s)"

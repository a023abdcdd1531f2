#!/usr/bin/env bash
# Runs from the packed folder: `cargo xtask gpu-pack`, copy this file into .gpu/, then on the
# device `bash .gpu/world2-call12.sh` (it cds to its own folder and uses bin/ and run.sh there).
# World 2 on one host: DDP and ZeRO-1 captured with their collectives (session 5).
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")"
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
nvidia-smi -L
timeout 60 bin/comm-launch --nproc-per-node 2 -- bin/ddp-train --backend nccl --model tiny --steps 10 --check 2>&1 | grep -E "step: |check|rror" | tail -3
timeout 60 bin/bench zero1-check --backend nccl --ranks 2 --dir /tmp/z2 2>&1 | tail -1
bin/train prepare --data /tmp/d > /dev/null 2>&1
for s in bucketed:25 zero1; do
  timeout 60 bin/comm-launch --nproc-per-node 2 -- bin/train run --data /tmp/d --out /tmp/r-$s --model small --bf16 \
    --global-batch 16 --steps 30 --eval-every 10 --ckpt-every 30 --strategy $s --backend nccl --no-progress 2>&1 | grep -E "train: step|trained|rror" | head -3
done

#!/usr/bin/env bash
# Session 37, call 203: FOUR GPUs, from the packed folder (copy this into .gpu/). About 8
# minutes. Issue 47's bars in one call with this session's code (ddp::tail: ZeRO-1's last
# bucket by NCCL's kernels at world 4): `run.sh train-speed` at worlds 1, 2 and 4, single,
# bucketed:25 and zero1, beside `bench single --clip 1`, and PyTorch's strongest trainer
# (DDP compile-ro) at worlds 2 and 4 in the same folder. Run with DDP_TAIL_STAGES=0 in the
# environment: the build then made ZeRO-1's last bucket beside its default at world 4, which
# call 202 did not bear out and the commit that followed removed.
export NCCL_NVLS_ENABLE=0
H="$(cd "$(dirname "$0")" && pwd)"; O="${OUT:-/tmp/out}"; mkdir -p "$O/c"
export OUT="$O/c"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
CASES=xl:bf16 TS_WORLDS="1 2 4" TS_STEPS=30 TS_STRATEGIES="single bucketed:25 zero1" TS_TORCH_WORLDS="2 4" TS_TORCH_PARALLEL=ddp \
  timeout 560 bash "$H/run.sh" train-speed 2>&1 | tee "$OUT/log.txt" | grep -v "^\[rank" | cut -c1-200 | tail -14
rm -rf "$OUT/train-speed/data" "$OUT/train-speed/run-"*; tar czf "$O/c.tgz" -C "$O" c
echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Session 55, call 307 (nvidia-h200-x2): where DDP (bucketed:25) at world 2 loses its
# 3.3 ms over one GPU (calls 305-306: 43.90-44.10 ms against 40.62-40.83, its bar 1.08x at
# the edge): the kernel tracer on `train run` single at world 1 and bucketed:25 at world 2,
# xl bf16, 8 x 128 a GPU (run.sh's trace job: categories, gaps, what runs beside NCCL).
# Copy into .gpu/ with cupti/ and nccl/. Output: $OUT/c307.tgz.
export NCCL_NVLS_ENABLE=0
H="$(cd "$(dirname "$0")" && pwd)"; O="${OUT:-/tmp/out}"; mkdir -p "$O/c307"
export OUT="$O/c307"
TRACE_STRATEGIES="single bucketed:25" TRACE_WORLD=2 TRACE_KERNELS=1 timeout 400 bash "$H/run.sh" trace 2>&1 | grep -v "^\[rank" | cut -c1-240 | tail -60
tar czf "$O/c307.tgz" -C "$O" c307; echo "done $(date -u +%T)"

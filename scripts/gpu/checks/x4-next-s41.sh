#!/usr/bin/env bash
# Session 41, for the next multi-GPU call (copy into .gpu/ with nccl/libnccl.so.2.gz; W=2 on
# a 2-GPU kind, else 4). `bash .gpu/x4-next-s41.sh PART`:
#   selftest  comm-selftest at world W with the copy-engine reduce-scatters' new adds
#             (kernels/sum.cu, session 41): its checks must pass on every rank (1 minute);
#   ring      ce-probe.py: the copy engines' gathers at world W with one copy at a time per
#             GPU (ce-ag-ring, -ring-pull) beside three at once (ce-ag-push, ce-ag) and
#             NCCL's, alone and beside the GEMMs (2 minutes). If a ring brings in clearly more
#             than ~230 GB/s at world 4, x4-one-s41.sh measures comm's copies in that order
#             (COMM_CE_ONE_STREAM=1) in the step;
#   bars      issue 47's bars as call 203 ran them: `run.sh train-speed` at worlds 1, 2 and
#             W, single, bucketed:25 and zero1, beside `bench single --clip 1`, and PyTorch's
#             DDP compile-ro trainer at 2 and W (about 8 minutes);
#   bars32    the same at 32 x 128 tokens a GPU (TS_BATCH=32), worlds 1 and W, ours only
#             (TS_TORCH_WORLDS=99: no PyTorch run).
export NCCL_NVLS_ENABLE=0
H="$(cd "$(dirname "$0")" && pwd)"; O="${OUT:-/tmp/out}"; W="${W:-4}"; mkdir -p "$O/c"
export OUT="$O/c"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
case "${1:-}" in
selftest)
  gunzip -kf "$H/nccl/libnccl.so.2.gz"
  for b in comm-launch comm-selftest; do gunzip -c "$H/bin/$b.gz" > "/tmp/$b"; chmod +x "/tmp/$b"; done
  env LD_LIBRARY_PATH="$H/nccl" COMM_TIMEOUT_S=30 timeout 120 /tmp/comm-launch --nproc-per-node "$W" -- /tmp/comm-selftest 2>&1 \
    | tee "$OUT/selftest.txt" | grep -i "rank 0\|fail\|mismatch\|error" | cut -c1-300 | head -8 ;;
ring)
  W=$W REPS=5 MODES="ce-ag-push gemm+ce-ag-push ce-ag-ring gemm+ce-ag-ring ce-ag-ring-pull gemm+ce-ag-ring-pull ce-ag gemm+ce-ag nccl-ag gemm+nccl-ag" \
    timeout 300 python3 "$H/../scripts/gpu/checks/ce-probe.py" 2>&1 | tee "$OUT/ring.txt" | tail -14 ;;
bars)
  CASES=xl:bf16 TS_WORLDS="1 2 $W" TS_STEPS=30 TS_STRATEGIES="single bucketed:25 zero1" TS_TORCH_WORLDS="2 $W" TS_TORCH_PARALLEL=ddp \
    timeout 560 bash "$H/run.sh" train-speed 2>&1 | tee "$OUT/log.txt" | grep -v "^\[rank" | cut -c1-200 | tail -14
  rm -rf "$OUT/train-speed/data" "$OUT/train-speed/run-"* ;;
bars32)
  CASES=xl:bf16 TS_BATCH=32 TS_WORLDS="1 $W" TS_STEPS=20 TS_STRATEGIES="single bucketed:25 zero1" TS_TORCH_WORLDS=99 \
    timeout 560 bash "$H/run.sh" train-speed 2>&1 | tee "$OUT/log.txt" | grep -v "^\[rank" | cut -c1-200 | tail -10
  rm -rf "$OUT/train-speed/data" "$OUT/train-speed/run-"* ;;
*) echo "usage: x4-next-s41.sh selftest|ring|bars|bars32" >&2; exit 2 ;;
esac
tar czf "$O/c.tgz" -C "$O" c; echo "done $(date -u +%T)"

#!/usr/bin/env bash
# Builds NCCL from source for Hopper alone (sm_90), with only the device kernels this
# project calls on one node without NVLS (ring and tree all-reduce and reduce-scatter of
# f32, bf16 and f64; ring all-gather and broadcast; send/recv; the symmetric kernels), small
# enough to travel in .gpu/ (the device tool's 64 MiB). For a device whose NCCL predates
# 2.28.7, where NCCL windows (comm::nccl::window) stay off.
#   bash scripts/gpu/build-nccl.sh SRC [OUT]   SRC: an NCCL source tree (e.g. tag
#   v2.28.9-1); OUT (default target/nccl, which `cargo xtask gpu-pack` copies into
#   .gpu/nccl) gets libnccl.so.2.gz (22 MB, 10 MB gzipped).
# About 15 minutes on two cores. On the device: gunzip it and put its folder first on
# LD_LIBRARY_PATH (scripts/gpu/checks/fsdp-call110.sh).
set -euo pipefail
SRC="$1"; OUT="${2:-target/nccl}"
eval "$(bash scripts/install-cuda-toolchain.sh --env)"
make -C "$SRC" -j"$(nproc)" src.build CUDA_HOME="$CUDA_HOME" CUDA_LIB="$CUDA_HOME/lib" \
  NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" \
  ONLY_FUNCS="(AllReduce|ReduceScatter) (Sum|PreMulSum|MinMax|SumPostDiv) (f32|bf16|f64) (RING|TREE) *|(AllGather|Broadcast) RING *|SendRecv"
mkdir -p "$OUT"
gzip -9c "$SRC"/build/lib/libnccl.so.2.* > "$OUT/libnccl.so.2.gz"
ls -la "$OUT"

// Cross-entropy over rows of logits: per-row loss and ∂logits. Part of fused.cu (see its header for the kernels' arguments).
#pragma once
#include "common.cuh"

// ---- cross-entropy: one block per row; logits f32 or bf16 (read as they are, computed in
// f32), ∂logits in the logits' dtype ---------------------------------------------------
template <typename T> __device__ float row_lse(const T *l, int cols, float *shared) {
  float m = -INFINITY;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, to_f(l[j]));
  m = block_reduce<true>(m, shared);
  float s = 0.0f;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) s += expf(to_f(l[j]) - m);
  return m + logf(block_reduce<false>(s, shared));
}

template <typename T>
__device__ void xent_fwd(const T *l, const uint32_t *tg, float *loss, int cols) {
  __shared__ float shared[32];
  const T *lr = l + (size_t)blockIdx.x * cols;
  const float lse = row_lse(lr, cols, shared);
  const uint32_t t = tg[blockIdx.x];  // out of range → NaN, never an out-of-bounds read
  if (threadIdx.x == 0) loss[blockIdx.x] = t < (uint32_t)cols ? lse - to_f(lr[t]) : NAN;
}

template <typename T>
__device__ void xent_bwd(const T *l, const uint32_t *tg, const float *g, T *dl, int cols) {
  __shared__ float shared[32];
  const size_t off = (size_t)blockIdx.x * cols;
  const float lse = row_lse(l + off, cols, shared), gr = g[blockIdx.x];
  const int t = tg[blockIdx.x];
  for (int j = threadIdx.x; j < cols; j += blockDim.x)
    dl[off + j] = from_f<T>(gr * (expf(to_f(l[off + j]) - lse) - (j == t ? 1.0f : 0.0f)));
}

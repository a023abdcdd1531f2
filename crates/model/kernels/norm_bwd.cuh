// The RMSNorm backward in two many-block kernels (∂x with each row's inverse RMS, then ∂w
// partial sums from them). Part of fused.cu (see its header for the kernels' arguments).
#pragma once
#include "common.cuh"

// ---- RMSNorm backward in two kernels with many blocks each (a block that walks several
// rows with block-wide reductions in between is latency-bound at these sizes):
// rmsnorm_dx_rs: one block per row; each thread keeps its columns j = tid + k·blockDim
// (k < RB_MAXC) in registers; writes ∂x (plus `res`, the residual branch's gradient, when
// ADD) and the row's inverse RMS to rs[row].
// rmsnorm_dw_rs: block b sums g ⊙ x ⊙ rs over R rows for 256 columns: b = rowchunk · nc +
// colchunk (nc = ⌈cols / 256⌉), partial sums to part[rowchunk, :]; the caller adds the
// partials (deterministic).
#define RB_MAXC 16
template <typename T, bool ADD>
__device__ void rmsnorm_dx_rs(const T *x, const T *w, const T *g, const T *res, T *dx, float *rs,
                              int cols, float eps) {
  __shared__ float shared[32];
  const size_t off = (size_t)blockIdx.x * cols;
  float xv[RB_MAXC], gw[RB_MAXC], ss = 0.0f, dot = 0.0f;
#pragma unroll
  for (int k = 0; k < RB_MAXC; k++) {
    const int j = threadIdx.x + k * blockDim.x;
    xv[k] = j < cols ? to_f(x[off + j]) : 0.0f;
    gw[k] = j < cols ? to_f(g[off + j]) * to_f(w[j]) : 0.0f;
    ss += xv[k] * xv[k];
    dot += gw[k] * xv[k];
  }
  const float r = rsqrtf(block_reduce<false>(ss, shared) / cols + eps);
  const float r3m = r * r * r * block_reduce<false>(dot, shared) / cols;
#pragma unroll
  for (int k = 0; k < RB_MAXC; k++) {
    const int j = threadIdx.x + k * blockDim.x;
    if (j < cols) {
      float d = r * gw[k] - xv[k] * r3m;
      if (ADD) d += to_f(res[off + j]);
      dx[off + j] = from_f<T>(d);
    }
  }
  if (threadIdx.x == 0) rs[blockIdx.x] = r;
}

template <typename T>
__device__ void rmsnorm_dw_rs(const T *x, const T *g, const float *rs, float *part, int rows,
                              int cols, int R) {
  const int nc = (cols + 255) / 256, chunk = blockIdx.x / nc;
  const int j = (blockIdx.x % nc) * 256 + threadIdx.x;
  if (j >= cols) return;
  const int r0 = chunk * R, r1 = min(r0 + R, rows);
  float acc = 0.0f;
  for (int i = r0; i < r1; i++) {
    const size_t k = (size_t)i * cols + j;
    acc += to_f(g[k]) * to_f(x[k]) * rs[i];
  }
  part[(size_t)chunk * cols + j] = acc;
}

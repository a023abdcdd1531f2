// RMSNorm forward (f32 statistics), ∂x, and ∂w partial sums. Part of fused.cu (see its header for the kernels' arguments).
#pragma once
#include "common.cuh"

// ---- RMSNorm for bf16 (f32 statistics): one block per row -----------------------------
template <typename T> __device__ void rmsnorm_fwd(const T *x, const T *w, T *y, int cols, float eps) {
  __shared__ float shared[32];
  const size_t off = (size_t)blockIdx.x * cols;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) ss += to_f(x[off + i]) * to_f(x[off + i]);
  const float r = rsqrtf(block_reduce<false>(ss, shared) / cols + eps);
  for (int i = threadIdx.x; i < cols; i += blockDim.x)
    y[off + i] = from_f<T>(to_f(x[off + i]) * r * to_f(w[i]));
}

template <typename T>
__device__ void rmsnorm_dx(const T *x, const T *w, const T *g, T *dx, int cols, float eps) {
  __shared__ float shared[32];
  const size_t off = (size_t)blockIdx.x * cols;
  float ss = 0.0f, dot = 0.0f;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) {
    const float xi = to_f(x[off + i]);
    ss += xi * xi;
    dot += to_f(g[off + i]) * to_f(w[i]) * xi;
  }
  const float r = rsqrtf(block_reduce<false>(ss, shared) / cols + eps);
  const float r3m = r * r * r * block_reduce<false>(dot, shared) / cols;
  for (int i = threadIdx.x; i < cols; i += blockDim.x)
    dx[off + i] = from_f<T>(r * to_f(g[off + i]) * to_f(w[i]) - to_f(x[off + i]) * r3m);
}

// ∂w partial sums: block b sums g ⊙ x ⊙ r over rows [b·R, min((b+1)·R, rows)) (r = the row's
// inverse RMS, f32) into part[b, :]; the caller sums the partials over b (deterministic).
template <typename T>
__device__ void rmsnorm_dw_part(const T *x, const T *g, float *part, int rows, int cols, int R,
                                float eps) {
  __shared__ float shared[32];
  __shared__ float rs[32];
  const int r0 = blockIdx.x * R, r1 = min(r0 + R, rows);
  for (int i = r0; i < r1; i++) {
    const size_t off = (size_t)i * cols;
    float ss = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) ss += to_f(x[off + j]) * to_f(x[off + j]);
    const float tot = block_reduce<false>(ss, shared);
    if (threadIdx.x == 0) rs[i - r0] = rsqrtf(tot / cols + eps);
  }
  __syncthreads();
  for (int j = threadIdx.x; j < cols; j += blockDim.x) {
    float acc = 0.0f;
    for (int i = r0; i < r1; i++) {
      const size_t k = (size_t)i * cols + j;
      acc += to_f(g[k]) * to_f(x[k]) * rs[i - r0];
    }
    part[(size_t)blockIdx.x * cols + j] = acc;
  }
}

// ---- RMSNorm forward, one warp per row, 16 bytes per lane and load (cols % (16 / sizeof(T))
// == 0, rows 16-byte aligned): no block-wide reduction; the second read of x comes from cache.
template <typename T> __device__ void rmsnorm_fwd_v(const T *x, const T *w, T *y, int rows, int cols, float eps) {
  constexpr int V = 16 / sizeof(T);
  const int lane = threadIdx.x & 31, row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= rows) return;
  const T *xr = x + (size_t)row * cols;
  T *yr = y + (size_t)row * cols;
  const int nv = cols / V;
  float ss = 0.0f;
  for (int v = lane; v < nv; v += 32) {
    float f[V];
    load16(xr + v * V, f);
#pragma unroll
    for (int k = 0; k < V; k++) ss += f[k] * f[k];
  }
  const float r = rsqrtf(warp_sum(ss) / cols + eps);
  for (int v = lane; v < nv; v += 32) {
    float f[V], wf[V];
    load16(xr + v * V, f);
    load16(w + v * V, wf);
#pragma unroll
    for (int k = 0; k < V; k++) f[k] = f[k] * r * wf[k];
    store16(yr + v * V, f);
  }
}

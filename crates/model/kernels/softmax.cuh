// The causal softmax (forward, backward; one warp per row, and the 4-entries-per-lane
// variant). Part of fused.cu (see its header for the kernels' arguments).
#pragma once
#include "common.cuh"

// ---- causal softmax: one warp per row ------------------------------------------------
template <typename T>
__device__ void causal_softmax_fwd(const T *x, T *y, int rows, int cols, int tq, float scale) {
  const int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
  if (row >= rows) return;
  const int last = row % tq + (cols - tq);  // last visible key
  const T *xr = x + (size_t)row * cols;
  T *yr = y + (size_t)row * cols;
  float m = -INFINITY;
  for (int j = lane; j <= last; j += 32) m = fmaxf(m, to_f(xr[j]) * scale);
  m = warp_max(m);
  float s = 0.0f;
  for (int j = lane; j <= last; j += 32) s += expf(to_f(xr[j]) * scale - m);
  const float inv = 1.0f / warp_sum(s);
  for (int j = lane; j < cols; j += 32)
    yr[j] = from_f<T>(j <= last ? expf(to_f(xr[j]) * scale - m) * inv : 0.0f);
}

template <typename T>
__device__ void causal_softmax_bwd(const T *y, const T *g, T *dx, int rows, int cols, float scale) {
  const int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
  if (row >= rows) return;
  const size_t off = (size_t)row * cols;
  float dot = 0.0f;
  for (int j = lane; j < cols; j += 32) dot += to_f(g[off + j]) * to_f(y[off + j]);
  dot = warp_sum(dot);
  for (int j = lane; j < cols; j += 32) {
    const float yj = to_f(y[off + j]);
    dx[off + j] = from_f<T>(scale * yj * (to_f(g[off + j]) - dot));
  }
}

// ---- the same, 4 consecutive entries per lane in registers (one read, one write of the
// row): tk a multiple of 4, at most 128 · SM_CHUNKS.
#define SM_CHUNKS 4
__device__ __forceinline__ void ld4(const float *p, float *o) {
  const float4 v = *reinterpret_cast<const float4 *>(p);
  o[0] = v.x, o[1] = v.y, o[2] = v.z, o[3] = v.w;
}
__device__ __forceinline__ void ld4(const bf16 *p, float *o) {
  const uint2 v = *reinterpret_cast<const uint2 *>(p);
  const bf16 *h = reinterpret_cast<const bf16 *>(&v);
  for (int i = 0; i < 4; i++) o[i] = to_f(h[i]);
}
__device__ __forceinline__ void st4(float *p, const float *o) {
  *reinterpret_cast<float4 *>(p) = make_float4(o[0], o[1], o[2], o[3]);
}
__device__ __forceinline__ void st4(bf16 *p, const float *o) {
  uint2 v;
  bf16 *h = reinterpret_cast<bf16 *>(&v);
  for (int i = 0; i < 4; i++) h[i] = from_f<bf16>(o[i]);
  *reinterpret_cast<uint2 *>(p) = v;
}

template <typename T>
__device__ void causal_softmax_fwd_v(const T *x, T *y, int rows, int cols, int tq, float scale) {
  const int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
  if (row >= rows) return;
  const int last = row % tq + (cols - tq);
  const T *xr = x + (size_t)row * cols;
  T *yr = y + (size_t)row * cols;
  float v[SM_CHUNKS][4];
  float m = -INFINITY;
#pragma unroll
  for (int c = 0; c < SM_CHUNKS; c++) {
    const int j0 = (c * 32 + lane) * 4;
    if (j0 < cols && j0 <= last) {
      ld4(xr + j0, v[c]);
      for (int i = 0; i < 4; i++) {
        v[c][i] = j0 + i <= last ? v[c][i] * scale : -INFINITY;
        m = fmaxf(m, v[c][i]);
      }
    }
  }
  m = warp_max(m);
  float s = 0.0f;
#pragma unroll
  for (int c = 0; c < SM_CHUNKS; c++) {
    const int j0 = (c * 32 + lane) * 4;
    for (int i = 0; i < 4; i++) {
      v[c][i] = (j0 < cols && j0 + i <= last) ? expf(v[c][i] - m) : 0.0f;
      s += v[c][i];
    }
  }
  const float inv = 1.0f / warp_sum(s);
#pragma unroll
  for (int c = 0; c < SM_CHUNKS; c++) {
    const int j0 = (c * 32 + lane) * 4;
    if (j0 < cols) {
      for (int i = 0; i < 4; i++) v[c][i] *= inv;
      st4(yr + j0, v[c]);
    }
  }
}

template <typename T>
__device__ void causal_softmax_bwd_v(const T *y, const T *g, T *dx, int rows, int cols, float scale) {
  const int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
  if (row >= rows) return;
  const size_t off = (size_t)row * cols;
  float yv[SM_CHUNKS][4], gv[SM_CHUNKS][4];
  float dot = 0.0f;
#pragma unroll
  for (int c = 0; c < SM_CHUNKS; c++) {
    const int j0 = (c * 32 + lane) * 4;
    if (j0 < cols) {
      ld4(y + off + j0, yv[c]);
      ld4(g + off + j0, gv[c]);
      for (int i = 0; i < 4; i++) dot += gv[c][i] * yv[c][i];
    }
  }
  dot = warp_sum(dot);
#pragma unroll
  for (int c = 0; c < SM_CHUNKS; c++) {
    const int j0 = (c * 32 + lane) * 4;
    if (j0 < cols) {
      for (int i = 0; i < 4; i++) yv[c][i] = scale * yv[c][i] * (gv[c][i] - dot);
      st4(dx + off + j0, yv[c]);
    }
  }
}

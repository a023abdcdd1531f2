// RoPE on interleaved pairs, and q, k, v split out of the qkv GEMM's rows with q and k
// roped (and its backward, the merge). Part of fused.cu (see its header for the kernels' arguments).
#pragma once
#include "common.cuh"

// ---- RoPE on interleaved pairs: one thread per pair ----------------------------------
template <typename T>
__device__ void rope(const T *x, const float *cos_t, const float *sin_t, T *y, int pairs, int half,
                     int t, float sign) {
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= pairs) return;
  const int i = p % half, pos = (p / half) % t;
  const float c = cos_t[pos * half + i], s = sign * sin_t[pos * half + i];
  const float2 r = rope_turn(to_f(x[2 * (size_t)p]), to_f(x[2 * (size_t)p + 1]), c, s);
  y[2 * (size_t)p] = from_f<T>(r.x);
  y[2 * (size_t)p + 1] = from_f<T>(r.y);
}

// ---- q, k, v from the qkv GEMM's rows, q and k roped: one thread per pair -------------------
// split: qkv (rows = b·t, 3, h, e) → out (3, b, h, t, e), q and k rotated by +angle, v copied;
// merge (its backward): dq, dk, dv (b, h, t, e) → dqkv (rows, 3, h, e), q and k rotated back.
// The rotation is rope's (same arithmetic, so the same bits as rope + a copy).
// One pair x[0..2] → y[0..2], rotated by the angle with cosine c and sine s (rope's
// arithmetic) when `rotate`, else copied.
template <typename T>
__device__ __forceinline__ void rotate_pair(const T *x, T *y, bool rotate, float c, float s) {
  const float a = to_f(x[0]), b = to_f(x[1]);
  const float2 r = rotate ? rope_turn(a, b, c, s) : make_float2(a, b);
  y[0] = from_f<T>(r.x);
  y[1] = from_f<T>(r.y);
}

template <typename T>
__device__ void qkv_rope_split(const T *qkv, const float *cos_t, const float *sin_t, T *out, int rows,
                               int t, int h, int e) {
  const int half = e / 2, nb = rows / t;
  const size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= (size_t)3 * rows * h * half) return;
  const int i = p % half;
  size_t r = p / half;
  const int ti = r % t;
  r /= t;
  const int hi = r % h;
  r /= h;
  const int bi = r % nb, which = r / nb;
  const size_t src = (((size_t)(bi * t + ti) * 3 + which) * h + hi) * e + 2 * i;
  rotate_pair(qkv + src, out + 2 * p, which < 2, cos_t[ti * half + i], sin_t[ti * half + i]);
}

template <typename T>
__device__ void qkv_rope_merge(const T *dq, const T *dk, const T *dv, const float *cos_t,
                               const float *sin_t, T *out, int rows, int t, int h, int e) {
  const int half = e / 2;
  const size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= (size_t)3 * rows * h * half) return;
  const int i = p % half;
  size_t r = p / half;
  const int hi = r % h;
  r /= h;
  const int which = r % 3, row = r / 3;
  const int bi = row / t, ti = row % t;
  const T *g = which == 0 ? dq : (which == 1 ? dk : dv);
  const size_t src = (((size_t)bi * h + hi) * t + ti) * e + 2 * i;
  rotate_pair(g + src, out + 2 * p, which < 2, cos_t[ti * half + i], -sin_t[ti * half + i]);
}

// The same two kernels moving 16 bytes per thread (V = 16 / sizeof(T) elements, V / 2
// pairs): used when e is a multiple of V and every buffer starts 16-byte aligned (the
// launcher checks); the same arithmetic per pair.
template <typename T>
__device__ __forceinline__ uint4 rotate_chunk(const uint4 in, bool rotate, const float *c,
                                              const float *s, float sign) {
  constexpr int P = 8 / sizeof(T);
  uint4 out;
  const T *x = reinterpret_cast<const T *>(&in);
  T *y = reinterpret_cast<T *>(&out);
#pragma unroll
  for (int k = 0; k < P; k++) rotate_pair(x + 2 * k, y + 2 * k, rotate, c[k], sign * s[k]);
  return out;
}

template <typename T>
__device__ void qkv_rope_split_v(const T *qkv, const float *cos_t, const float *sin_t, T *out,
                                 int rows, int t, int h, int e) {
  constexpr int V = 16 / sizeof(T), P = V / 2;
  const int half = e / 2, cpr = half / P, nb = rows / t;
  const size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x, total = (size_t)3 * rows * h * cpr;
  if (p >= total) return;
  // p = (((which · nb + bi) · h + hi) · t + ti) · cpr + c
  const int n[4] = {cpr, t, h, nb};
  int a[5];
  unflatten(p, total, n, a);
  const int c = a[0], ti = a[1], hi = a[2], bi = a[3], which = a[4];
  const size_t src = (((size_t)(bi * t + ti) * 3 + which) * h + hi) * e + (size_t)c * V;
  const int tab = ti * half + c * P;
  reinterpret_cast<uint4 *>(out)[p] = rotate_chunk<T>(
      *reinterpret_cast<const uint4 *>(qkv + src), which < 2, cos_t + tab, sin_t + tab, 1.0f);
}

template <typename T>
__device__ void qkv_rope_merge_v(const T *dq, const T *dk, const T *dv, const float *cos_t,
                                 const float *sin_t, T *out, int rows, int t, int h, int e) {
  constexpr int V = 16 / sizeof(T), P = V / 2;
  const int half = e / 2, cpr = half / P;
  const size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= (size_t)3 * rows * h * cpr) return;
  const int c = p % cpr;
  size_t r = p / cpr;
  const int hi = r % h;
  r /= h;
  const int which = r % 3, row = r / 3;
  const int bi = row / t, ti = row % t;
  const T *g = which == 0 ? dq : (which == 1 ? dk : dv);
  const size_t src = (((size_t)bi * h + hi) * t + ti) * e + (size_t)c * V;
  const int tab = ti * half + c * P;
  reinterpret_cast<uint4 *>(out)[p] = rotate_chunk<T>(
      *reinterpret_cast<const uint4 *>(g + src), which < 2, cos_t + tab, sin_t + tab, -1.0f);
}

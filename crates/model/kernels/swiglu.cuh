// SwiGLU's element-wise part and its backward. Part of fused.cu (see its header for the kernels' arguments).
#pragma once
#include "common.cuh"

// ---- SwiGLU activation ----------------------------------------------------------------
// SwiGLU's element-wise part, 16 bytes per thread per iteration where a, b and the output
// are 16-byte aligned (one element at a time otherwise, and for the tail): the same
// arithmetic per element either way.
__device__ __forceinline__ bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }
__device__ __forceinline__ float silu_mul1(float av, float bv) {
  return av / (1.0f + expf(-av)) * bv;
}
__device__ __forceinline__ float2 silu_mul1_bwd(float av, float bv, float gv) {
  const float sg = 1.0f / (1.0f + expf(-av));
  return make_float2(gv * bv * sg * (1.0f + av * (1.0f - sg)), gv * av * sg);
}

template <typename T> __device__ void silu_mul_fwd(const T *a, const T *b, T *y, int n) {
  constexpr int V = 16 / sizeof(T);
  const int nv = (aligned16(a) && aligned16(b) && aligned16(y)) ? n / V : 0;
  const int first = blockIdx.x * blockDim.x + threadIdx.x, stride = blockDim.x * gridDim.x;
  for (int i = first; i < nv; i += stride) {
    const uint4 ra = reinterpret_cast<const uint4 *>(a)[i], rb = reinterpret_cast<const uint4 *>(b)[i];
    uint4 ry;
    const T *ta = reinterpret_cast<const T *>(&ra), *tb = reinterpret_cast<const T *>(&rb);
    T *ty = reinterpret_cast<T *>(&ry);
#pragma unroll
    for (int k = 0; k < V; k++) ty[k] = from_f<T>(silu_mul1(to_f(ta[k]), to_f(tb[k])));
    reinterpret_cast<uint4 *>(y)[i] = ry;
  }
  for (int i = nv * V + first; i < n; i += stride) y[i] = from_f<T>(silu_mul1(to_f(a[i]), to_f(b[i])));
}

template <typename T> __device__ void silu_mul_bwd(const T *a, const T *b, const T *g, T *out, int n) {
  constexpr int V = 16 / sizeof(T);
  T *da = out, *db = out + n;
  const bool vec = aligned16(a) && aligned16(b) && aligned16(g) && aligned16(da) && aligned16(db);
  const int nv = vec ? n / V : 0;
  const int first = blockIdx.x * blockDim.x + threadIdx.x, stride = blockDim.x * gridDim.x;
  for (int i = first; i < nv; i += stride) {
    const uint4 ra = reinterpret_cast<const uint4 *>(a)[i], rb = reinterpret_cast<const uint4 *>(b)[i],
                rg = reinterpret_cast<const uint4 *>(g)[i];
    uint4 rda, rdb;
    const T *ta = reinterpret_cast<const T *>(&ra), *tb = reinterpret_cast<const T *>(&rb),
            *tg = reinterpret_cast<const T *>(&rg);
    T *tda = reinterpret_cast<T *>(&rda), *tdb = reinterpret_cast<T *>(&rdb);
#pragma unroll
    for (int k = 0; k < V; k++) {
      const float2 d = silu_mul1_bwd(to_f(ta[k]), to_f(tb[k]), to_f(tg[k]));
      tda[k] = from_f<T>(d.x);
      tdb[k] = from_f<T>(d.y);
    }
    reinterpret_cast<uint4 *>(da)[i] = rda;
    reinterpret_cast<uint4 *>(db)[i] = rdb;
  }
  for (int i = nv * V + first; i < n; i += stride) {
    const float2 d = silu_mul1_bwd(to_f(a[i]), to_f(b[i]), to_f(g[i]));
    da[i] = from_f<T>(d.x);
    db[i] = from_f<T>(d.y);
  }
}

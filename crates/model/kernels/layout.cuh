// Memory-bound layout kernels: y = a + b, the (A, B, C, E) → (A, C, B, E) swap, the 2-D
// transpose. Part of fused.cu (see its header for the kernels' arguments).
#pragma once
#include "common.cuh"

// ---- y = a + b on 16-byte chunks (8 bf16 or 4 f32), the tail one element at a time.
__device__ __forceinline__ void add_chunk(const uint4 &a, const uint4 &b, uint4 &y, float) {
  const float *fa = reinterpret_cast<const float *>(&a), *fb = reinterpret_cast<const float *>(&b);
  float *fy = reinterpret_cast<float *>(&y);
#pragma unroll
  for (int i = 0; i < 4; i++) fy[i] = fa[i] + fb[i];
}
__device__ __forceinline__ void add_chunk(const uint4 &a, const uint4 &b, uint4 &y, bf16) {
  const __nv_bfloat162 *ha = reinterpret_cast<const __nv_bfloat162 *>(&a);
  const __nv_bfloat162 *hb = reinterpret_cast<const __nv_bfloat162 *>(&b);
  __nv_bfloat162 *hy = reinterpret_cast<__nv_bfloat162 *>(&y);
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const float2 fa = __bfloat1622float2(ha[i]), fb = __bfloat1622float2(hb[i]);
    hy[i] = __floats2bfloat162_rn(fa.x + fb.x, fa.y + fb.y);
  }
}
template <typename T> __device__ void add(const T *a, const T *b, T *y, int n) {
  constexpr int V = 16 / sizeof(T);
  const int nv = n / V, stride = blockDim.x * gridDim.x;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < nv; i += stride) {
    uint4 out;
    add_chunk(reinterpret_cast<const uint4 *>(a)[i], reinterpret_cast<const uint4 *>(b)[i], out, T());
    reinterpret_cast<uint4 *>(y)[i] = out;
  }
  for (int i = V * nv + blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = from_f<T>(to_f(a[i]) + to_f(b[i]));
}

// ---- (A, B, C, E) → (A, C, B, E), moving 16-byte chunks (ev chunks per E row).
__device__ void swap12(const uint4 *x, uint4 *y, int A, int B, int C, int ev) {
  const size_t n = (size_t)A * B * C * ev, stride = (size_t)blockDim.x * gridDim.x;
  for (size_t o = blockIdx.x * (size_t)blockDim.x + threadIdx.x; o < n; o += stride) {
    const int e = o % ev;
    size_t rest = o / ev;
    const int b = rest % B;
    rest /= B;
    const int c = rest % C;
    const size_t a = rest / C;
    y[o] = x[((a * B + b) * C + c) * ev + e];
  }
}

// ---- 2-D transpose (rows, cols) → (cols, rows) through 32 × 33 shared tiles, blocks of
// 256 threads (8 rows of 32), tiles taken grid-stride.
template <typename T>
__device__ void transpose2d(const T *x, T *y, int rows, int cols) {
  __shared__ T tile[32][33];
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const int tr = (rows + 31) / 32, tc = (cols + 31) / 32;
  for (int t = blockIdx.x; t < tr * tc; t += gridDim.x) {
    const int r0 = (t / tc) * 32, c0 = (t % tc) * 32;
    for (int i = ty; i < 32; i += 8)
      if (r0 + i < rows && c0 + tx < cols) tile[i][tx] = x[(size_t)(r0 + i) * cols + c0 + tx];
    __syncthreads();
    for (int i = ty; i < 32; i += 8)
      if (c0 + i < cols && r0 + tx < rows) y[(size_t)(c0 + i) * rows + r0 + tx] = tile[tx][i];
    __syncthreads();
  }
}

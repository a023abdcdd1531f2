// Gradient accumulation in place: acc <- (acc + g) * s, acc f32, g f32 or bf16, s read as
// an argument (1 for a plain sum). One pass: read acc and g, write acc (10 bytes per
// element for a bf16 gradient), instead of a cast, an add into a new buffer and a scale.
// The sum and the product round separately (no fused multiply-add), so the bits equal
// candle's add followed by its affine.
#include <cuda_bf16.h>

__device__ __forceinline__ float to_f(float g) { return g; }
__device__ __forceinline__ float to_f(__nv_bfloat16 g) { return __bfloat162float(g); }

template <typename G>
__device__ void accum(float *__restrict__ acc, const G *__restrict__ g,
                      const unsigned long long n, const float s, const int scale) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)blockDim.x * gridDim.x) {
    const float t = __fadd_rn(acc[i], to_f(g[i]));
    acc[i] = scale ? __fmul_rn(t, s) : t;
  }
}

extern "C" __global__ void accum_f32(float *__restrict__ acc, const float *__restrict__ g,
                                     const unsigned long long n, const float s, const int scale) {
  accum(acc, g, n, s, scale);
}
extern "C" __global__ void accum_bf16(float *__restrict__ acc,
                                      const __nv_bfloat16 *__restrict__ g,
                                      const unsigned long long n, const float s,
                                      const int scale) {
  accum(acc, g, n, s, scale);
}

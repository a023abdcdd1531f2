// f32 → bf16, four at a time. Part of fused.cu (see its header for the kernels' arguments).
#pragma once
#include "common.cuh"

// f32 → bf16, four elements per thread (x 16-byte aligned), then the n % 4 left one by one;
// round to nearest even, as candle's cast.
extern "C" __global__ void cast_f32_bf16_x4(const float *x, bf16 *y, int n, int, int, float) {
  const int n4 = n / 4, stride = blockDim.x * gridDim.x;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
    const float4 v = reinterpret_cast<const float4 *>(x)[i];
    __nv_bfloat162 a = __floats2bfloat162_rn(v.x, v.y), b = __floats2bfloat162_rn(v.z, v.w);
    uint2 out;
    out.x = *reinterpret_cast<uint32_t *>(&a);
    out.y = *reinterpret_cast<uint32_t *>(&b);
    reinterpret_cast<uint2 *>(y)[i] = out;
  }
  for (int i = 4 * n4 + blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = __float2bfloat16(x[i]);
}

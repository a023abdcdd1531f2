// The casts of comm's mixed-precision all-gathers (src/nccl/cast.rs): up to 8 runs of f32
// into bf16 in one launch, blockIdx.y picking the run. Rounds to nearest even, as
// __float2bfloat16_rn (candle's cast, AdamW's bf16 copies) does, element by element.
#include <cuda_bf16.h>
#include <stdint.h>

#define COMM_CAST_RUNS 8

struct Runs {
  const float *src[COMM_CAST_RUNS];
  __nv_bfloat16 *dst[COMM_CAST_RUNS];
  unsigned long long n[COMM_CAST_RUNS];
};

extern "C" __global__ void comm_cast_f32_bf16(Runs r) {
  const int k = blockIdx.y;
  const float *s = r.src[k];
  __nv_bfloat16 *d = r.dst[k];
  const size_t n = r.n[k];
  const size_t stride = (size_t)blockDim.x * gridDim.x;
  const size_t i0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  size_t tail = 0;
  if ((uintptr_t)s % 16 == 0 && (uintptr_t)d % 8 == 0) {
    // 16 bytes read and 8 written a thread: four elements.
    const size_t n4 = n / 4;
    const float4 *s4 = reinterpret_cast<const float4 *>(s);
    uint2 *d4 = reinterpret_cast<uint2 *>(d);
    for (size_t i = i0; i < n4; i += stride) {
      const float4 v = s4[i];
      __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y);
      __nv_bfloat162 hi = __floats2bfloat162_rn(v.z, v.w);
      uint2 o;
      o.x = *reinterpret_cast<unsigned *>(&lo);
      o.y = *reinterpret_cast<unsigned *>(&hi);
      d4[i] = o;
    }
    tail = n4 * 4;
  }
  for (size_t i = tail + i0; i < n; i += stride) d[i] = __float2bfloat16_rn(s[i]);
}

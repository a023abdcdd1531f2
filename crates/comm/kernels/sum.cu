// The adds of comm's copy-engine reduce-scatters (src/nccl/ce_reduce.rs): up to 8 runs a
// launch, blockIdx.y picking the run. Each run's destination becomes (its `own` chunk, this
// rank's, bf16 + `parts` peers' parts, each `stride` elements after the one before) × its
// `scale`, summed in f32 and rounded to nearest even once; in place, `own` is `dst`.
#include <cuda_bf16.h>
#include <stdint.h>

#define COMM_SUM_RUNS 8

struct SumRuns {
  const __nv_bfloat16 *own[COMM_SUM_RUNS];
  __nv_bfloat16 *dst[COMM_SUM_RUNS];
  const __nv_bfloat16 *src[COMM_SUM_RUNS];
  unsigned long long n[COMM_SUM_RUNS];
  unsigned long long stride[COMM_SUM_RUNS];
  float scale[COMM_SUM_RUNS];
};

__device__ __forceinline__ void add8(float *a, uint4 v) {
  const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&v);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 f = __bfloat1622float2(h[j]);
    a[2 * j] += f.x;
    a[2 * j + 1] += f.y;
  }
}

extern "C" __global__ void comm_sum_parts(SumRuns r, unsigned parts) {
  const int k = blockIdx.y;
  const float scale = r.scale[k];
  __nv_bfloat16 *d = r.dst[k];
  const __nv_bfloat16 *o = r.own[k];
  const __nv_bfloat16 *s = r.src[k];
  const size_t n = r.n[k], st = r.stride[k];
  const size_t step = (size_t)blockDim.x * gridDim.x;
  const size_t i0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  size_t tail = 0;
  if ((uintptr_t)d % 16 == 0 && (uintptr_t)o % 16 == 0 && (uintptr_t)s % 16 == 0 && st % 8 == 0) {
    // 16 bytes a load: eight elements.
    const size_t n8 = n / 8;
    uint4 *d8 = reinterpret_cast<uint4 *>(d);
    const uint4 *o8 = reinterpret_cast<const uint4 *>(o);
    for (size_t i = i0; i < n8; i += step) {
      float a[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
      add8(a, o8[i]);
      for (unsigned p = 0; p < parts; ++p)
        add8(a, reinterpret_cast<const uint4 *>(s + p * st)[i]);
      uint4 res;
      __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&res);
#pragma unroll
      for (int j = 0; j < 4; ++j) h[j] = __floats2bfloat162_rn(a[2 * j] * scale, a[2 * j + 1] * scale);
      d8[i] = res;
    }
    tail = n8 * 8;
  }
  for (size_t i = tail + i0; i < n; i += step) {
    float a = __bfloat162float(o[i]);
    for (unsigned p = 0; p < parts; ++p) a += __bfloat162float(s[p * st + i]);
    d[i] = __float2bfloat16_rn(a * scale);
  }
}

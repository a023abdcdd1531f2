// Gradient accumulation: out <- (x + y) * s in f32, x and y f32 or bf16, out f32 (out may be
// x itself: the sum in place). `scale` 0: no product. The first two micro-batches' bf16
// gradients are summed into a new f32 buffer in one pass (8 bytes per element), each later
// one added in place (10 bytes). The sum and the product round separately (no fused
// multiply-add), so the bits equal casting to f32, adding, then scaling.
#include <cuda_bf16.h>

__device__ __forceinline__ float to_f(float g) { return g; }
__device__ __forceinline__ float to_f(__nv_bfloat16 g) { return __bfloat162float(g); }

__device__ __forceinline__ float4 load4(const float *p, unsigned long long i) {
  return reinterpret_cast<const float4 *>(p)[i];
}
__device__ __forceinline__ float4 load4(const __nv_bfloat16 *p, unsigned long long i) {
  const uint2 raw = reinterpret_cast<const uint2 *>(p)[i];
  const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&raw.x));
  const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&raw.y));
  return make_float4(a.x, a.y, b.x, b.y);
}

__device__ __forceinline__ float one(float x, float y, float s, int scale) {
  const float t = __fadd_rn(x, y);
  return scale ? __fmul_rn(t, s) : t;
}

__device__ __forceinline__ void store4(float *o, unsigned long long i, float4 v) {
  reinterpret_cast<float4 *>(o)[i] = v;
}
// Rounded to nearest even, as a cast of the f32 result (candle's to_dtype) rounds.
__device__ __forceinline__ void store4(__nv_bfloat16 *o, unsigned long long i, float4 v) {
  __nv_bfloat162 a = __floats2bfloat162_rn(v.x, v.y), b = __floats2bfloat162_rn(v.z, v.w);
  uint2 raw;
  raw.x = *reinterpret_cast<unsigned int *>(&a);
  raw.y = *reinterpret_cast<unsigned int *>(&b);
  reinterpret_cast<uint2 *>(o)[i] = raw;
}
__device__ __forceinline__ void store1(float *o, unsigned long long i, float v) { o[i] = v; }
__device__ __forceinline__ void store1(__nv_bfloat16 *o, unsigned long long i, float v) {
  o[i] = __float2bfloat16_rn(v);
}

// Four elements per thread where every start is 16-byte aligned (vec4), then the rest.
template <typename O, typename X, typename Y>
__device__ void accum(O *out, const X *x, const Y *y, const unsigned long long n,
                      const float s, const int scale, const int vec4) {
  const unsigned long long first = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  const unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;
  unsigned long long done = 0;
  if (vec4) {
    const unsigned long long n4 = n / 4;
    for (unsigned long long i = first; i < n4; i += stride) {
      const float4 a = load4(x, i), b = load4(y, i);
      store4(out, i,
             make_float4(one(a.x, b.x, s, scale), one(a.y, b.y, s, scale),
                         one(a.z, b.z, s, scale), one(a.w, b.w, s, scale)));
    }
    done = 4 * n4;
  }
  for (unsigned long long i = done + first; i < n; i += stride)
    store1(out, i, one(to_f(x[i]), to_f(y[i]), s, scale));
}

#define ACCUM(name, X, Y)                                                                      \
  extern "C" __global__ void name(float *out, const X *x, const Y *y,                          \
                                  const unsigned long long n, const float s, const int scale,  \
                                  const int vec4) {                                            \
    accum(out, x, y, n, s, scale, vec4);                                                       \
  }

ACCUM(accum_f32_f32, float, float)
ACCUM(accum_f32_bf16, float, __nv_bfloat16)
ACCUM(accum_bf16_f32, __nv_bfloat16, float)
ACCUM(accum_bf16_bf16, __nv_bfloat16, __nv_bfloat16)

// The last micro-batch's sum going out in bf16 (DDP's and ZeRO's wire): out <- bf16((x + y) * s),
// x the f32 sum: one pass (8 bytes an element for a bf16 gradient) where the sum in place
// and a cast moved 16. The bits of that sum, then that cast.
#define ACCUM_TO_BF16(name, Y)                                                                 \
  extern "C" __global__ void name(__nv_bfloat16 *out, const float *x, const Y *y,              \
                                  const unsigned long long n, const float s, const int scale,  \
                                  const int vec4) {                                            \
    accum(out, x, y, n, s, scale, vec4);                                                       \
  }

ACCUM_TO_BF16(accum_to_bf16_f32_f32, float)
ACCUM_TO_BF16(accum_to_bf16_f32_bf16, __nv_bfloat16)

// In place: out <- (out + y) * s.
#define ACCUM_IN_PLACE(name, Y)                                                                \
  extern "C" __global__ void name(float *out, const Y *y, const unsigned long long n,           \
                                  const float s, const int scale, const int vec4) {             \
    accum(out, (const float *)out, y, n, s, scale, vec4);                                       \
  }

ACCUM_IN_PLACE(accum_in_place_f32, float)
ACCUM_IN_PLACE(accum_in_place_bf16, __nv_bfloat16)

// Many sums in one launch (the small parameters' gradients, a norm's weight each: one
// kernel per micro-batch instead of one per parameter): sum j is out[j] <- (x[j] + y[j]) * s,
// x[j] = out[j] for a sum in place. Passed by value (1 KB); block row j of the grid is sum j.
#define AM_MAX 32
struct AccumTable {
  unsigned long long n[AM_MAX];
  unsigned long long out[AM_MAX];
  unsigned long long x[AM_MAX];
  unsigned long long y[AM_MAX];
  unsigned int count;
};

#define ACCUM_MANY(name, X, Y)                                                                 \
  extern "C" __global__ void name(const __grid_constant__ AccumTable t, const float s,         \
                                  const int scale) {                                            \
    const unsigned int j = blockIdx.y;                                                          \
    if (j >= t.count) return;                                                                   \
    float *out = reinterpret_cast<float *>(t.out[j]);                                           \
    const X *x = reinterpret_cast<const X *>(t.x[j]);                                           \
    const Y *y = reinterpret_cast<const Y *>(t.y[j]);                                           \
    const unsigned long long n = t.n[j];                                                        \
    const unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;               \
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;      \
         i < n; i += stride)                                                                    \
      out[i] = one(to_f(x[i]), to_f(y[i]), s, scale);                                           \
  }

ACCUM_MANY(accum_many_f32_f32, float, float)
ACCUM_MANY(accum_many_f32_bf16, float, __nv_bfloat16)
ACCUM_MANY(accum_many_bf16_f32, __nv_bfloat16, float)
ACCUM_MANY(accum_many_bf16_bf16, __nv_bfloat16, __nv_bfloat16)

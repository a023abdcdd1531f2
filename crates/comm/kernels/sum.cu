// The adds of comm's copy-engine reduce-scatters (src/nccl/ce_reduce.rs): up to 8 runs a
// launch, blockIdx.y picking the run. Each run's destination becomes (its `own` chunk, this
// rank's, bf16 + `parts` peers' parts, each `stride` elements after the one before) × its
// `scale`, summed in f32 and rounded to nearest even once; in place, `own` is `dst`. With
// `sq` (else null), block (x, y) also writes the sum of the squares of what it wrote to
// sq[y * gridDim.x + x], and comm_sumsq then sums those in order and takes the root: the
// same bits each time.
//
// The adds are memory-bound, so each thread keeps many loads in flight: for 1 to 7 parts
// (worlds 2 to 8) the count is a template argument, and a thread issues every load of two
// 16-byte groups (own and parts, at i and i + the grid's stride) before its first add. With
// the count known only at run time a thread waited for each load in turn: alone on an H200
// that kernel moved 3.34 TB/s with 3 parts and 3.39 with 1, this one 4.02 and 3.87
// (scripts/gpu/checks/prio-probe.py, call 226). Every element is summed in the same order,
// and each thread's squares in the same order, as before: the same bits (adds-check.py).
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

// The sum of a block's `v` (256 threads) in thread 0, in a fixed order.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float w[8];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) w[threadIdx.x >> 5] = v;
  __syncthreads();
  float t = 0.f;
  if (threadIdx.x == 0)
    for (int i = 0; i < (int)(blockDim.x >> 5); ++i) t += w[i];
  return t;
}

// One 16-byte group's sums `a` (own and parts, in order) × `scale`, rounded once; `q` gets
// the squares of what is written, in order.
__device__ __forceinline__ uint4 round8(const float *a, float scale, float &q) {
  uint4 res;
  __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&res);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    h[j] = __floats2bfloat162_rn(a[2 * j] * scale, a[2 * j + 1] * scale);
    const float2 b = __bfloat1622float2(h[j]);
    q += b.x * b.x + b.y * b.y;
  }
  return res;
}

// Group i of a run whose `parts` are known only at run time (more than 7).
__device__ __forceinline__ uint4 group8(const uint4 *o8, const __nv_bfloat16 *s, size_t st,
                                        unsigned parts, size_t i, float scale, float &q) {
  float a[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  add8(a, o8[i]);
  for (unsigned p = 0; p < parts; ++p) add8(a, reinterpret_cast<const uint4 *>(s + p * st)[i]);
  return round8(a, scale, q);
}

// The 16-byte groups of one run with P parts: the groups i0, i0 + step, … as the loop of
// `group8` would take them, two at a time with all their loads first. Returns the squares.
template <int P>
__device__ float run8(uint4 *d8, const uint4 *o8, const __nv_bfloat16 *s, size_t st, size_t n8,
                      size_t i0, size_t step, float scale) {
  float q = 0.f;
  size_t i = i0;
  for (; i + step < n8; i += 2 * step) {
    uint4 v[2][P + 1];
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      v[u][0] = o8[i + u * step];
#pragma unroll
      for (int p = 0; p < P; ++p)
        v[u][p + 1] = reinterpret_cast<const uint4 *>(s + p * st)[i + u * step];
    }
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      float a[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int p = 0; p <= P; ++p) add8(a, v[u][p]);
      d8[i + u * step] = round8(a, scale, q);
    }
  }
  if (i < n8) d8[i] = group8(o8, s, st, P, i, scale, q);
  return q;
}

extern "C" __global__ void comm_sum_parts(SumRuns r, unsigned parts, float *sq) {
  const int k = blockIdx.y;
  const float scale = r.scale[k];
  __nv_bfloat16 *d = r.dst[k];
  const __nv_bfloat16 *o = r.own[k];
  const __nv_bfloat16 *s = r.src[k];
  const size_t n = r.n[k], st = r.stride[k];
  const size_t step = (size_t)blockDim.x * gridDim.x;
  const size_t i0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  size_t tail = 0;
  float q = 0.f;
  if ((uintptr_t)d % 16 == 0 && (uintptr_t)o % 16 == 0 && (uintptr_t)s % 16 == 0 && st % 8 == 0) {
    // 16 bytes a load: eight elements.
    const size_t n8 = n / 8;
    uint4 *d8 = reinterpret_cast<uint4 *>(d);
    const uint4 *o8 = reinterpret_cast<const uint4 *>(o);
    switch (parts) {
    case 0: q = run8<0>(d8, o8, s, st, n8, i0, step, scale); break;
    case 1: q = run8<1>(d8, o8, s, st, n8, i0, step, scale); break;
    case 2: q = run8<2>(d8, o8, s, st, n8, i0, step, scale); break;
    case 3: q = run8<3>(d8, o8, s, st, n8, i0, step, scale); break;
    case 4: q = run8<4>(d8, o8, s, st, n8, i0, step, scale); break;
    case 5: q = run8<5>(d8, o8, s, st, n8, i0, step, scale); break;
    case 6: q = run8<6>(d8, o8, s, st, n8, i0, step, scale); break;
    case 7: q = run8<7>(d8, o8, s, st, n8, i0, step, scale); break;
    default:
      for (size_t i = i0; i < n8; i += step) d8[i] = group8(o8, s, st, parts, i, scale, q);
    }
    tail = n8 * 8;
  }
  for (size_t i = tail + i0; i < n; i += step) {
    float a = __bfloat162float(o[i]);
    for (unsigned p = 0; p < parts; ++p) a += __bfloat162float(s[p * st + i]);
    const __nv_bfloat16 b = __float2bfloat16_rn(a * scale);
    d[i] = b;
    q += __bfloat162float(b) * __bfloat162float(b);
  }
  if (sq != nullptr) {
    const float t = block_sum(q);
    if (threadIdx.x == 0) sq[(size_t)blockIdx.y * gridDim.x + blockIdx.x] = t;
  }
}

// out[0] = the square root of the sum of the n floats at `sq`, summed in a fixed order (one
// block of 256 threads).
extern "C" __global__ void comm_sumsq(const float *sq, unsigned long long n, float *out) {
  float a = 0.f;
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) a += sq[i];
  const float t = block_sum(a);
  if (threadIdx.x == 0) out[0] = sqrtf(t);
}

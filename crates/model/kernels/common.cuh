// Helpers shared by the kernels of fused.cu: f32 <-> T conversions and warp/block
// reductions.
#pragma once
#include <cuda_bf16.h>
#include <stdint.h>

typedef __nv_bfloat16 bf16;

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(bf16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ bf16 from_f<bf16>(float v) { return __float2bfloat16(v); }

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
  return v;
}

// Block-wide reduction (sum or max) for blocks of a multiple of 32 threads.
template <bool MAX> __device__ float block_reduce(float v, float *shared) {
  v = MAX ? warp_max(v) : warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = (threadIdx.x < warps) ? shared[threadIdx.x] : (MAX ? -INFINITY : 0.0f);
  if (warp == 0) v = MAX ? warp_max(v) : warp_sum(v);
  if (threadIdx.x == 0) shared[0] = v;
  __syncthreads();
  v = shared[0];
  __syncthreads();
  return v;
}


// A flat index r = ((a[K] · n[K-1] + a[K-1]) · … ) · n[0] + a[0] taken apart, in 32 bits where
// the count `total` fits. ptxas gives each 64-bit division a test of the operands, a 32-bit
// path and a call; in 32 bits those go (call 292, xl at 8 × 1024: qkv_rope_split_v 2.95 →
// 2.64 ms a step, flash_dot 1.75 → 1.56).
template <int K, typename I>
__device__ __forceinline__ void unflatten_in(I r, const int (&n)[K], int (&a)[K + 1]) {
#pragma unroll
  for (int k = 0; k < K; k++) {
    a[k] = r % (I)n[k];
    r /= (I)n[k];
  }
  a[K] = r;
}
template <int K>
__device__ __forceinline__ void unflatten(size_t r, size_t total, const int (&n)[K], int (&a)[K + 1]) {
  if (total <= 0xffffffffull)
    unflatten_in<K, unsigned>((unsigned)r, n, a);
  else
    unflatten_in<K, size_t>(r, n, a);
}

// 16 bytes (16 / sizeof(T) elements) to and from f32 registers; p must be 16-byte aligned.
template <typename T> __device__ __forceinline__ void load16(const T *p, float *f) {
  const uint4 r = *reinterpret_cast<const uint4 *>(p);
  const T *t = reinterpret_cast<const T *>(&r);
#pragma unroll
  for (int k = 0; k < 16 / (int)sizeof(T); k++) f[k] = to_f(t[k]);
}
template <typename T> __device__ __forceinline__ void store16(T *p, const float *f) {
  uint4 r;
  T *t = reinterpret_cast<T *>(&r);
#pragma unroll
  for (int k = 0; k < 16 / (int)sizeof(T); k++) t[k] = from_f<T>(f[k]);
  *reinterpret_cast<uint4 *>(p) = r;
}

// RoPE's turn of one interleaved pair (a, b) by the angle with cosine c and sine s (the
// inverse turn is s negated): the rope, qkv split/merge and attention kernels share it, so
// they round the same bits.
__device__ __forceinline__ float2 rope_turn(float a, float b, float c, float s) {
  return make_float2(a * c - b * s, a * s + b * c);
}

// Four consecutive pairs of f turned by the angles with cosines c[0..4) and sines s[0..4)
// (the inverse turn where `back`): the attention kernels' 16-byte chunks.
__device__ __forceinline__ void rope_turn4(float *f, const float *c, const float *s, bool back) {
#pragma unroll
  for (int k = 0; k < 4; k++) {
    const float2 t = rope_turn(f[2 * k], f[2 * k + 1], c[k], back ? -s[k] : s[k]);
    f[2 * k] = t.x;
    f[2 * k + 1] = t.y;
  }
}

// The global gradient norm and torch.nn.utils.clip_grad_norm_'s coefficient, on the device,
// deterministically (fixed grid, fixed summation order; f32 accumulation):
//   gradnorm_sumsq: one launch per chunk of up to GN_MAX gradient tensors (their addresses
//     and lengths passed by value as PyTorch's multi_tensor_apply does); block b of chunk c
//     writes the sum of squares of its grid-strided elements of every tensor of the chunk
//     to partials[c * gridDim.x + b];
//   gradnorm_finish: one block sums the partials in a fixed order and writes
//     out[0] = norm = sqrt(sum), out[1] = clip / (norm + 1e-6) clamped to at most 1 (1 when
//     clip <= 0; NaN when the norm is not finite, which makes the fused AdamW skip the step).
// The fused AdamW kernel reads out[1] (its `gs` argument) and scales the gradients as it
// updates, so clipping costs one read of the gradients and no host round trip.
#include <cuda_bf16.h>

#define GN_MAX 160
#define GN_THREADS 512
#define GN_UNROLL 4

struct GradTable {
  unsigned long long ptr[GN_MAX];
  unsigned long long n[GN_MAX];
  unsigned int bf16[GN_MAX];
  unsigned int count;
};

__device__ __forceinline__ float sq(float x) { return x * x; }

__device__ float block_sum(float v) {
  __shared__ float s[GN_THREADS];
  s[threadIdx.x] = v;
  __syncthreads();
  for (unsigned int w = blockDim.x / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }
  return s[0];
}

extern "C" __global__ void gradnorm_sumsq(const GradTable t, float *__restrict__ partials) {
  float acc = 0.0f;
  const unsigned long long first = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  const unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;
  for (unsigned int k = 0; k < t.count; ++k) {
    const unsigned long long n = t.n[k];
    if (t.bf16[k]) {
      const __nv_bfloat16 *g = reinterpret_cast<const __nv_bfloat16 *>(t.ptr[k]);
      unsigned long long done = 0;
      if ((t.ptr[k] & 15) == 0) {
        const uint4 *g8 = reinterpret_cast<const uint4 *>(g);
        const unsigned long long n8 = n / 8;
        // GN_UNROLL independent 16-byte loads in flight per thread (the pass is bound by
        // memory latency at one load per thread), each added in a fixed order.
        for (unsigned long long i = first; i < n8; i += GN_UNROLL * stride) {
          uint4 raw[GN_UNROLL];
#pragma unroll
          for (int u = 0; u < GN_UNROLL; ++u) {
            const unsigned long long k = i + u * stride;
            raw[u] = k < n8 ? g8[k] : make_uint4(0, 0, 0, 0);
          }
#pragma unroll
          for (int u = 0; u < GN_UNROLL; ++u) {
            const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&raw[u]);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              const float2 f = __bfloat1622float2(h[j]);
              acc += sq(f.x) + sq(f.y);
            }
          }
        }
        done = 8 * n8;
      }
      for (unsigned long long i = done + first; i < n; i += stride) acc += sq(__bfloat162float(g[i]));
    } else {
      const float *g = reinterpret_cast<const float *>(t.ptr[k]);
      unsigned long long done = 0;
      if ((t.ptr[k] & 15) == 0) {
        const float4 *g4 = reinterpret_cast<const float4 *>(g);
        const unsigned long long n4 = n / 4;
        for (unsigned long long i = first; i < n4; i += GN_UNROLL * stride) {
          float4 f[GN_UNROLL];
#pragma unroll
          for (int u = 0; u < GN_UNROLL; ++u) {
            const unsigned long long k = i + u * stride;
            f[u] = k < n4 ? g4[k] : make_float4(0.f, 0.f, 0.f, 0.f);
          }
#pragma unroll
          for (int u = 0; u < GN_UNROLL; ++u) acc += sq(f[u].x) + sq(f[u].y) + sq(f[u].z) + sq(f[u].w);
        }
        done = 4 * n4;
      }
      for (unsigned long long i = done + first; i < n; i += stride) acc += sq(g[i]);
    }
  }
  const float s = block_sum(acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

extern "C" __global__ void gradnorm_finish(const float *__restrict__ partials,
                                           const unsigned int count, const float clip,
                                           float *__restrict__ out) {
  float acc = 0.0f;
  for (unsigned int i = threadIdx.x; i < count; i += blockDim.x) acc += partials[i];
  const float s = block_sum(acc);
  if (threadIdx.x == 0) {
    const float norm = sqrtf(s);
    const float c = clip / (norm + 1e-6f);
    out[0] = norm;
    // A non-finite norm (inf or NaN) gives NaN: the fused AdamW skips the step on it.
    out[1] = !isfinite(norm) ? __int_as_float(0x7fc00000) : (clip <= 0.0f || c >= 1.0f ? 1.0f : c);
  }
}

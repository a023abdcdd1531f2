// The global gradient norm and torch.nn.utils.clip_grad_norm_'s coefficient, on the device,
// deterministically (fixed grid, fixed summation order; f32 accumulation):
//   gradnorm_sumsq: one launch per chunk of up to GN_MAX gradient tensors (their addresses
//     and lengths passed by value as PyTorch's multi_tensor_apply does). The tensors' 16-byte
//     vectors form one index space (vstart: prefix sums), grid-strided with GN_UNROLL loads
//     in flight per thread whatever tensor they fall in, so a tensor's end costs no
//     memory-latency bubble; the last elements of a tensor that fill no whole vector, and
//     whole tensors that are not 16-byte aligned, are summed one by one after it. Block b
//     of chunk c writes its sum of squares to partials[c * gridDim.x + b];
//   gradnorm_sumsq_tensorwise: the same sums taken tensor after tensor (each tensor
//     grid-strided on its own): the layout before the flat one, kept as the benchmark's
//     reference (`bench gradnorm`) and selectable with SEAM_GRADNORM=tensorwise;
//   gradnorm_finish: one block sums the partials in a fixed order and writes
//     out[0] = norm = sqrt(sum), out[1] = clip / (norm + 1e-6) clamped to at most 1 (1 when
//     clip <= 0; NaN when the norm is not finite, which makes the fused AdamW skip the step).
// The fused AdamW kernel reads out[1] (its `gs` argument) and scales the gradients as it
// updates, so clipping costs one read of the gradients and no host round trip.
#include <cuda_bf16.h>

#define GN_MAX 128
#define GN_THREADS 512
#define GN_UNROLL 4

// Passed by value (3.6 KB, under the 4 KB of kernel parameters every driver takes).
struct GradTable {
  unsigned long long ptr[GN_MAX];
  unsigned long long n[GN_MAX];          // elements
  unsigned long long vstart[GN_MAX + 1]; // 16-byte vectors before tensor k (0 where unaligned)
  unsigned int bf16[GN_MAX];
  unsigned int count;
  unsigned int ragged; // some tensor has elements outside its whole vectors
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

// The sum of squares of one 16-byte vector: 8 bf16 or 4 f32.
__device__ __forceinline__ float sumsq16(const uint4 raw, const bool bf16) {
  float acc = 0.0f;
  if (bf16) {
    const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&raw);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 f = __bfloat1622float2(h[j]);
      acc += sq(f.x) + sq(f.y);
    }
  } else {
    const float4 f = *reinterpret_cast<const float4 *>(&raw);
    acc += sq(f.x) + sq(f.y) + sq(f.z) + sq(f.w);
  }
  return acc;
}

extern "C" __global__ void gradnorm_sumsq(const __grid_constant__ GradTable t,
                                          float *__restrict__ partials) {
  float acc = 0.0f;
  const unsigned long long first = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  const unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;
  const unsigned long long total = t.vstart[t.count];
  unsigned int k = 0; // the tensor of the vector last loaded: only grows
  for (unsigned long long i = first; i < total; i += GN_UNROLL * stride) {
    uint4 raw[GN_UNROLL];
    bool bf[GN_UNROLL];
#pragma unroll
    for (int u = 0; u < GN_UNROLL; ++u) {
      const unsigned long long j = i + u * stride;
      raw[u] = make_uint4(0, 0, 0, 0);
      bf[u] = true;
      if (j < total) {
        while (j >= t.vstart[k + 1]) ++k;
        raw[u] = reinterpret_cast<const uint4 *>(t.ptr[k])[j - t.vstart[k]];
        bf[u] = t.bf16[k] != 0;
      }
    }
#pragma unroll
    for (int u = 0; u < GN_UNROLL; ++u) acc += sumsq16(raw[u], bf[u]);
  }
  if (t.ragged) {
    for (unsigned int q = 0; q < t.count; ++q) {
      const unsigned long long per = t.bf16[q] ? 8 : 4;
      const unsigned long long n = t.n[q];
      for (unsigned long long e = (t.vstart[q + 1] - t.vstart[q]) * per + first; e < n; e += stride)
        acc += t.bf16[q] ? sq(__bfloat162float(reinterpret_cast<const __nv_bfloat16 *>(t.ptr[q])[e]))
                         : sq(reinterpret_cast<const float *>(t.ptr[q])[e]);
    }
  }
  const float s = block_sum(acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

extern "C" __global__ void gradnorm_sumsq_tensorwise(const __grid_constant__ GradTable t,
                                                     float *__restrict__ partials) {
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

// Fused AdamW step (torch.optim.AdamW semantics) for one f32 parameter tensor:
// reads p, g, m, v once and writes p, m, v once. The gradient is f32 (adamw_f32) or bf16
// (adamw_f32_gbf16: a bf16 model's gradients, or bf16 gradients off the wire, read as they
// are instead of being cast to f32 first); the arithmetic is f32 either way.
//   p <- p * (1 - lr*wd);  m <- m + (g - m)(1 - b1);  v <- b2 v + (1 - b2) g^2
//   p <- p - step_size * m / (sqrt(v) / bc2_sqrt + eps),   step_size = lr / (1 - b1^t)
// When `s16` is not null the kernel also writes the new p rounded to bf16 (nearest even,
// as the cast kernels round) there: a bf16 model's forward then reads that copy instead of
// casting its f32 masters every step (model::shadow).
// When `gs` is not null the gradient is multiplied by gs[0] first (f32): the clipping
// coefficient min(1, clip / (norm + 1e-6)) that kernels/gradnorm.cu wrote on the device, so
// clipping by the global norm needs no host round trip and no pass over the gradients. A
// non-finite gs[0] (gradnorm.cu writes NaN for a non-finite norm) skips the update: p, m,
// v and the bf16 copy keep their values.
#include <cuda_bf16.h>

__device__ __forceinline__ float grad_f(float g) { return g; }
__device__ __forceinline__ float grad_f(__nv_bfloat16 g) { return __bfloat162float(g); }

// One element's update; every kernel below computes exactly this.
__device__ __forceinline__ void update(float &p, const float g, float &m, float &v,
                                       const float decay, const float b1, const float b2,
                                       const float eps, const float step_size,
                                       const float bc2_sqrt) {
  const float mi = m + (g - m) * (1.0f - b1);
  const float vi = v * b2 + (1.0f - b2) * g * g;
  const float denom = sqrtf(vi) / bc2_sqrt + eps;
  p = p * decay - step_size * mi / denom;
  m = mi;
  v = vi;
}

template <typename G>
__device__ void adamw(float *__restrict__ p, const G *__restrict__ g, float *__restrict__ m,
                      float *__restrict__ v, const unsigned long long n, const float decay,
                      const float b1, const float b2, const float eps, const float step_size,
                      const float bc2_sqrt, __nv_bfloat16 *__restrict__ s16, const float sc) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)blockDim.x * gridDim.x) {
    update(p[i], grad_f(g[i]) * sc, m[i], v[i], decay, b1, b2, eps, step_size, bc2_sqrt);
    if (s16) s16[i] = __float2bfloat16(p[i]);
  }
}

// Four gradients at once: 16 bytes of f32, 8 bytes of bf16.
__device__ __forceinline__ float4 grad4(const float *__restrict__ g, unsigned long long i) {
  return reinterpret_cast<const float4 *>(g)[i];
}
__device__ __forceinline__ float4 grad4(const __nv_bfloat16 *__restrict__ g, unsigned long long i) {
  const uint2 raw = reinterpret_cast<const uint2 *>(g)[i];
  const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&raw.x));
  const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&raw.y));
  return make_float4(a.x, a.y, b.x, b.y);
}

// Four elements at 16-byte vector i: p, m, v, the gradient scaled by sc, and (where s16
// is not null) the bf16 copy. Both the kernel a tensor and the grouped one run it.
template <typename G>
__device__ __forceinline__ void update4(float *__restrict__ p, const G *__restrict__ g,
                                        float *__restrict__ m, float *__restrict__ v,
                                        const unsigned long long i, const float decay,
                                        const float b1, const float b2, const float eps,
                                        const float step_size, const float bc2_sqrt,
                                        __nv_bfloat16 *__restrict__ s16, const float sc) {
  float4 gi = grad4(g, i);
  gi.x *= sc;
  gi.y *= sc;
  gi.z *= sc;
  gi.w *= sc;
  float4 *__restrict__ p4 = reinterpret_cast<float4 *>(p);
  float4 *__restrict__ m4 = reinterpret_cast<float4 *>(m);
  float4 *__restrict__ v4 = reinterpret_cast<float4 *>(v);
  float4 pi = p4[i], mi = m4[i], vi = v4[i];
  update(pi.x, gi.x, mi.x, vi.x, decay, b1, b2, eps, step_size, bc2_sqrt);
  update(pi.y, gi.y, mi.y, vi.y, decay, b1, b2, eps, step_size, bc2_sqrt);
  update(pi.z, gi.z, mi.z, vi.z, decay, b1, b2, eps, step_size, bc2_sqrt);
  update(pi.w, gi.w, mi.w, vi.w, decay, b1, b2, eps, step_size, bc2_sqrt);
  p4[i] = pi;
  m4[i] = mi;
  v4[i] = vi;
  if (s16) {
    __nv_bfloat162 a = __floats2bfloat162_rn(pi.x, pi.y), b = __floats2bfloat162_rn(pi.z, pi.w);
    uint2 out;
    out.x = *reinterpret_cast<unsigned int *>(&a);
    out.y = *reinterpret_cast<unsigned int *>(&b);
    reinterpret_cast<uint2 *>(s16)[i] = out;
  }
}

// The same update with 16-byte loads and stores (the launcher picks it when p, m, v and g
// are 16-/8-byte aligned, i.e. g's start offset is a multiple of 4): four elements per
// thread per iteration, then the last n % 4 elements one by one.
template <typename G>
__device__ void adamw_vec4(float *__restrict__ p, const G *__restrict__ g, float *__restrict__ m,
                           float *__restrict__ v, const unsigned long long n, const float decay,
                           const float b1, const float b2, const float eps,
                           const float step_size, const float bc2_sqrt,
                           __nv_bfloat16 *__restrict__ s16, const float sc) {
  const unsigned long long n4 = n / 4;
  const unsigned long long first = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  const unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;
  for (unsigned long long i = first; i < n4; i += stride)
    update4(p, g, m, v, i, decay, b1, b2, eps, step_size, bc2_sqrt, s16, sc);
  for (unsigned long long i = 4 * n4 + first; i < n; i += stride) {
    update(p[i], grad_f(g[i]) * sc, m[i], v[i], decay, b1, b2, eps, step_size, bc2_sqrt);
    if (s16) s16[i] = __float2bfloat16(p[i]);
  }
}

// The step's scalars are read from device memory (decay, b1, b2, eps, step_size,
// bc2_sqrt), not passed as arguments: a CUDA graph freezes kernel arguments, and the bias
// corrections change every step (model::fused_adamw::DeviceScalars uploads them).
#define ADAMW_KERNEL(name, impl, G)                                                            \
  extern "C" __global__ void name(float *__restrict__ p, const G *__restrict__ g,              \
                                  float *__restrict__ m, float *__restrict__ v,                \
                                  const unsigned long long n, const float *__restrict__ s,     \
                                  __nv_bfloat16 *__restrict__ s16,                             \
                                  const float *__restrict__ gs) {                              \
    const float sc = gs ? gs[0] : 1.0f;                                                        \
    if (!isfinite(sc)) return; /* a non-finite norm: the step is skipped, nothing written */  \
    impl(p, g, m, v, n, s[0], s[1], s[2], s[3], s[4], s[5], s16, sc);                          \
  }

ADAMW_KERNEL(adamw_f32, adamw, float)
ADAMW_KERNEL(adamw_f32_gbf16, adamw, __nv_bfloat16)
ADAMW_KERNEL(adamw_f32_v4, adamw_vec4, float)
ADAMW_KERNEL(adamw_f32_gbf16_v4, adamw_vec4, __nv_bfloat16)

// Many tensors in one launch (PyTorch's multi_tensor_apply): up to AW_MAX parameters'
// addresses passed by value (3.6 KB, under the 4 KB of kernel parameters every driver
// takes). Block b updates AW_BLOCK_ELEMS elements of the tensor k whose blocks
// bstart[k] .. bstart[k+1] hold b, so the launch has one tail instead of one a tensor.
// Each element's update is `update` above: the same bits as the kernels one a tensor.
#define AW_MAX 64
#define AW_THREADS 256
#define AW_BLOCK_ELEMS (4 * AW_THREADS)

struct AdamwTable {
  unsigned long long p[AW_MAX], g[AW_MAX], m[AW_MAX], v[AW_MAX];
  unsigned long long s16[AW_MAX]; // 0: no bf16 copy
  unsigned long long n[AW_MAX];
  unsigned int bstart[AW_MAX + 1];
  unsigned int count;
  unsigned long long vec4; // bit k: tensor k's p, m, v 16-byte, g and s16 8-byte aligned
};

template <typename G>
__device__ void adamw_table(const AdamwTable &t, const float *__restrict__ s,
                            const float *__restrict__ gs) {
  const float sc = gs ? gs[0] : 1.0f;
  if (!isfinite(sc)) return; // a non-finite norm: the step is skipped, nothing written
  unsigned int lo = 0, hi = t.count;
  while (hi - lo > 1) {
    const unsigned int mid = (lo + hi) / 2;
    if (t.bstart[mid] <= blockIdx.x) lo = mid;
    else hi = mid;
  }
  const unsigned int k = lo;
  const unsigned long long n = t.n[k];
  const unsigned long long base = (unsigned long long)(blockIdx.x - t.bstart[k]) * AW_BLOCK_ELEMS;
  float *__restrict__ p = reinterpret_cast<float *>(t.p[k]);
  const G *__restrict__ g = reinterpret_cast<const G *>(t.g[k]);
  float *__restrict__ m = reinterpret_cast<float *>(t.m[k]);
  float *__restrict__ v = reinterpret_cast<float *>(t.v[k]);
  __nv_bfloat16 *__restrict__ s16 = reinterpret_cast<__nv_bfloat16 *>(t.s16[k]);
  const float decay = s[0], b1 = s[1], b2 = s[2], eps = s[3], step_size = s[4], bc2_sqrt = s[5];
  const unsigned long long e0 = base + 4 * threadIdx.x;
  if (((t.vec4 >> k) & 1ull) && e0 + 3 < n) {
    update4(p, g, m, v, e0 / 4, decay, b1, b2, eps, step_size, bc2_sqrt, s16, sc);
    return;
  }
  // Unaligned tensors, and an aligned tensor's last n % 4 elements: one by one, the
  // block's threads on adjacent elements.
  for (unsigned int j = 0; j < 4; ++j) {
    const unsigned long long e = ((t.vec4 >> k) & 1ull) ? e0 + j : base + j * AW_THREADS + threadIdx.x;
    if (e < n) {
      update(p[e], grad_f(g[e]) * sc, m[e], v[e], decay, b1, b2, eps, step_size, bc2_sqrt);
      if (s16) s16[e] = __float2bfloat16(p[e]);
    }
  }
}

extern "C" __global__ void __launch_bounds__(AW_THREADS)
    adamw_table_f32(const __grid_constant__ AdamwTable t, const float *__restrict__ s,
                    const float *__restrict__ gs) {
  adamw_table<float>(t, s, gs);
}
extern "C" __global__ void __launch_bounds__(AW_THREADS)
    adamw_table_gbf16(const __grid_constant__ AdamwTable t, const float *__restrict__ s,
                      const float *__restrict__ gs) {
  adamw_table<__nv_bfloat16>(t, s, gs);
}

// Fused AdamW step (torch.optim.AdamW semantics) for one f32 parameter tensor:
// reads p, g, m, v once and writes p, m, v once. The gradient is f32 (adamw_f32) or bf16
// (adamw_f32_gbf16: a bf16 model's gradients, or bf16 gradients off the wire, read as they
// are instead of being cast to f32 first); the arithmetic is f32 either way.
//   p <- p * (1 - lr*wd);  m <- m + (g - m)(1 - b1);  v <- b2 v + (1 - b2) g^2
//   p <- p - step_size * m / (sqrt(v) / bc2_sqrt + eps),   step_size = lr / (1 - b1^t)
#include <cuda_bf16.h>

__device__ __forceinline__ float grad_f(float g) { return g; }
__device__ __forceinline__ float grad_f(__nv_bfloat16 g) { return __bfloat162float(g); }

template <typename G>
__device__ void adamw(float *__restrict__ p, const G *__restrict__ g, float *__restrict__ m,
                      float *__restrict__ v, const unsigned long long n, const float decay,
                      const float b1, const float b2, const float eps, const float step_size,
                      const float bc2_sqrt) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)blockDim.x * gridDim.x) {
    const float gi = grad_f(g[i]);
    const float mi = m[i] + (gi - m[i]) * (1.0f - b1);
    const float vi = v[i] * b2 + (1.0f - b2) * gi * gi;
    const float denom = sqrtf(vi) / bc2_sqrt + eps;
    p[i] = p[i] * decay - step_size * mi / denom;
    m[i] = mi;
    v[i] = vi;
  }
}

extern "C" __global__ void adamw_f32(float *__restrict__ p, const float *__restrict__ g,
                                     float *__restrict__ m, float *__restrict__ v,
                                     const unsigned long long n, const float decay,
                                     const float b1, const float b2, const float eps,
                                     const float step_size, const float bc2_sqrt) {
  adamw(p, g, m, v, n, decay, b1, b2, eps, step_size, bc2_sqrt);
}

extern "C" __global__ void adamw_f32_gbf16(float *__restrict__ p,
                                           const __nv_bfloat16 *__restrict__ g,
                                           float *__restrict__ m, float *__restrict__ v,
                                           const unsigned long long n, const float decay,
                                           const float b1, const float b2, const float eps,
                                           const float step_size, const float bc2_sqrt) {
  adamw(p, g, m, v, n, decay, b1, b2, eps, step_size, bc2_sqrt);
}

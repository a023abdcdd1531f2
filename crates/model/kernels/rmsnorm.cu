// Fused RMSNorm over the last dimension (f32), one block per row.
//   forward:  y = x * r * w,  r = rsqrt(mean(x^2) + eps)
//   backward: dx = r * (g*w) - x * r^3 * mean(g*w*x)      (dw is reduced over rows by the caller)
// Derivation: docs/kernels.md.

__device__ __forceinline__ float block_sum(float v, float *shared) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  v = (threadIdx.x < warps) ? shared[threadIdx.x] : 0.0f;
  if (warp == 0)
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  if (threadIdx.x == 0) shared[0] = v;
  __syncthreads();
  v = shared[0];
  __syncthreads();
  return v;
}

extern "C" __global__ void rmsnorm_fwd_f32(const float *__restrict__ x, const float *__restrict__ w,
                                           float *__restrict__ y, const int cols, const float eps) {
  __shared__ float shared[32];
  const float *xr = x + (size_t)blockIdx.x * cols;
  float *yr = y + (size_t)blockIdx.x * cols;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) ss += xr[i] * xr[i];
  const float r = rsqrtf(block_sum(ss, shared) / cols + eps);
  for (int i = threadIdx.x; i < cols; i += blockDim.x) yr[i] = xr[i] * r * w[i];
}

extern "C" __global__ void rmsnorm_bwd_dx_f32(const float *__restrict__ x, const float *__restrict__ w,
                                              const float *__restrict__ g, float *__restrict__ dx,
                                              const int cols, const float eps) {
  __shared__ float shared[32];
  const size_t off = (size_t)blockIdx.x * cols;
  float ss = 0.0f, dot = 0.0f;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) {
    const float xi = x[off + i];
    ss += xi * xi;
    dot += g[off + i] * w[i] * xi;
  }
  const float r = rsqrtf(block_sum(ss, shared) / cols + eps);
  const float m = block_sum(dot, shared) / cols;
  const float r3m = r * r * r * m;
  for (int i = threadIdx.x; i < cols; i += blockDim.x)
    dx[off + i] = r * g[off + i] * w[i] - x[off + i] * r3m;
}

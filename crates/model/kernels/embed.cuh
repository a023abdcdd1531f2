// Token embedding: the gather and its deterministic backward. Part of fused.cu (see its header for the kernels' arguments).
#pragma once
#include "common.cuh"

// ---- token embedding: forward gathers f32 table rows into T; backward, one block per
// vocabulary row v: warp 0 lists (in token order) the tokens whose id is v, then every
// thread sums those tokens' gradient rows for its columns (deterministic).
#define EMBED_MAX 4096
template <typename T>
__device__ void embed_fwd(const float *w, const uint32_t *ids, T *y, int n, int d) {
  const size_t total = (size_t)n * d, stride = (size_t)blockDim.x * gridDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += stride)
    y[i] = from_f<T>(w[(size_t)ids[i / d] * d + i % d]);
}

template <typename T>
__device__ void embed_bwd(const T *g, const uint32_t *ids, float *dw, int n, int d) {
  __shared__ int list[EMBED_MAX];
  __shared__ int count;
  const unsigned v = blockIdx.x;
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    int c = 0;
    for (int base = 0; base < n; base += 32) {
      const int r = base + lane;
      const bool m = r < n && ids[r] == v;
      const unsigned mask = __ballot_sync(0xffffffffu, m);
      if (m) list[c + __popc(mask & ((1u << lane) - 1u))] = r;
      c += __popc(mask);
    }
    if (lane == 0) count = c;
  }
  __syncthreads();
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    float acc = 0.0f;
    for (int k = 0; k < count; k++) acc += to_f(g[(size_t)list[k] * d + j]);
    dw[(size_t)v * d + j] = acc;
  }
}

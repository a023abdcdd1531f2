// Token embedding: the gather and its deterministic backward. Part of fused.cu (see its header for the kernels' arguments).
#pragma once
#include "common.cuh"

// ---- token embedding: forward gathers f32 table rows into T; backward, one block per
// vocabulary row v, over the tokens in chunks of EMBED_CHUNK: every warp lists (in token
// order) the tokens of its part of the chunk whose id is v, then every thread adds those
// tokens' gradient rows for its columns, warp part by warp part, onto what the chunks before
// left in dw: the row's tokens summed in token order from 0, for any count of tokens
// (deterministic). A row no token names gets zeros.
#define EMBED_CHUNK 4096
#define EMBED_WARPS 8
template <typename T>
__device__ void embed_fwd(const float *w, const uint32_t *ids, T *y, int n, int d) {
  const size_t total = (size_t)n * d, stride = (size_t)blockDim.x * gridDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += stride)
    y[i] = from_f<T>(w[(size_t)ids[i / d] * d + i % d]);
}

// acc + the gradient rows of tokens list[0..c) at column j, added in list order, eight rows a
// batch whose loads do not wait on the adds: a row that many tokens name (a frequent token,
// or a small vocabulary) would otherwise wait on one load at a time.
template <typename T>
__device__ __forceinline__ float embed_sum(float acc, const T *__restrict__ g, const int *list,
                                           int c, int d, int j) {
  int k = 0;
  for (; k + 8 <= c; k += 8) {
    float x[8];
#pragma unroll
    for (int u = 0; u < 8; u++) x[u] = to_f(g[(size_t)list[k + u] * d + j]);
#pragma unroll
    for (int u = 0; u < 8; u++) acc += x[u];
  }
  for (; k < c; k++) acc += to_f(g[(size_t)list[k] * d + j]);
  return acc;
}

// Launched with EMBED_WARPS warps a block, one block per vocabulary row.
template <typename T>
__device__ void embed_bwd(const T *__restrict__ g, const uint32_t *__restrict__ ids,
                          float *__restrict__ dw, int n, int d) {
  constexpr int PART = EMBED_CHUNK / EMBED_WARPS;  // each warp's tokens of a chunk
  __shared__ int list[EMBED_CHUNK];
  __shared__ int count[EMBED_WARPS];
  const unsigned v = blockIdx.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float *row = dw + (size_t)v * d;
  bool written = false;  // the same in every thread: it follows the shared counts
  for (int chunk = 0; chunk < n; chunk += EMBED_CHUNK) {
    // This warp's tokens [lo, hi), 128 a step: four coalesced loads, then four ballots.
    const int lo = chunk + warp * PART, hi = min(lo + PART, n);
    int c = 0;
    for (int base = lo; base < hi; base += 128) {
      bool m[4];
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const int r = base + 32 * i + lane;
        m[i] = r < hi && ids[r] == v;
      }
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const unsigned mask = __ballot_sync(0xffffffffu, m[i]);
        if (m[i]) list[warp * PART + c + __popc(mask & ((1u << lane) - 1u))] = base + 32 * i + lane;
        c += __popc(mask);
      }
    }
    if (lane == 0) count[warp] = c;
    __syncthreads();
    int total = 0;
#pragma unroll
    for (int w = 0; w < EMBED_WARPS; w++) total += count[w];
    if (total > 0) {
      for (int j = threadIdx.x; j < d; j += blockDim.x) {
        float acc = written ? row[j] : 0.0f;
        for (int w = 0; w < EMBED_WARPS; w++) acc = embed_sum(acc, g, list + w * PART, count[w], d, j);
        row[j] = acc;
      }
      written = true;
    }
    __syncthreads();  // the list and counts are the next chunk's
  }
  if (!written)
    for (int j = threadIdx.x; j < d; j += blockDim.x) row[j] = 0.0f;
}

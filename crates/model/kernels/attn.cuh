// Causal attention for bf16 on tensor cores (wmma 16 × 16 × 16, f32 accumulate), one block
// per (batch, head). Replaces the scores GEMM, the softmax kernel, the values GEMM and the
// head transpose of the forward (and their four GEMMs, softmax backward and transpose in the
// backward): the scores and their gradient stay in shared memory as f32. T (the sequence)
// is a multiple of 32, at most 128; E (the head width) a multiple of 16, at most 128 (a
// template parameter, so the loops over it unroll and their tile loads issue together).
// The T / 16 row strips of 16 queries are paired, w with T/16 − 1 − w, on T / 32 warps: under
// the causal mask every warp then has the same number of tiles. Part of fused.cu (see its
// header for the kernels' arguments).
#pragma once
#include "common.cuh"
#include <mma.h>

namespace attn {
using namespace nvcuda;
typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> A;
typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::col_major> At;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> B;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> Bt;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> C;

// Row strides of the shared strips: f32 (16 rows of max(T, E)) and bf16 (rows of T), padded
// so that a tile's rows start 4 banks apart.
__device__ __forceinline__ int sf(int T, int E) { return max(T, E) + 4; }
__device__ __forceinline__ int sh(int T) { return T + 8; }

// The N accumulators of a 16 × 16N strip to the f32 strip s (row stride ld), then as bf16
// to 16 rows of `out` (row stride ldo), 8 elements per lane and store.
template <int N>
__device__ __forceinline__ void strip_out(C (&acc)[N], float *s, int ld, bf16 *out, size_t ldo) {
#pragma unroll
  for (int n = 0; n < N; n++) wmma::store_matrix_sync(s + n * 16, acc[n], ld, wmma::mem_row_major);
  __syncwarp();
  const int lane = threadIdx.x & 31;
  for (int c = lane; c < 16 * 2 * N; c += 32) {
    const int r = c / (2 * N), col = (c % (2 * N)) * 8;
    store16(out + r * ldo + col, s + r * ld + col);
  }
  __syncwarp();
}
}  // namespace attn

// Forward. q, k, v (b, h, T, E); out: P = softmax(scale · q kᵀ, causal) (b, h, T, T), then
// Y = P v as (b, T, h, E) (the output projection's rows). Shared memory: per warp an f32
// strip 16 × sf and a bf16 strip 16 × sh.
template <int E>
__device__ void attn_fwd(const bf16 *q, const bf16 *k, const bf16 *v, bf16 *out, int Bn, int H,
                         int T, float scale) {
  using namespace attn;
  constexpr int N = E / 16;
  extern __shared__ float attn_fwd_sm[];
  const int bh = blockIdx.x, b = bh / H, h = bh % H, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int SF = sf(T, E), SH = sh(T), W = T / 16;
  float *s = attn_fwd_sm + warp * 16 * SF;
  bf16 *p = reinterpret_cast<bf16 *>(attn_fwd_sm + (W / 2) * 16 * SF) + warp * 16 * SH;
  const size_t head = (size_t)bh * T * E, ldy = (size_t)H * E;
  const bf16 *qh = q + head, *kh = k + head, *vh = v + head;
  for (int half = 0; half < 2; half++) {
    const int st = half ? W - 1 - warp : warp, i0 = st * 16;
    // Scores of the strip, key tiles j <= st (the rest is masked).
    A qa[N];
#pragma unroll
    for (int kk = 0; kk < N; kk++) wmma::load_matrix_sync(qa[kk], qh + (size_t)i0 * E + kk * 16, E);
    for (int j = 0; j <= st; j++) {
      Bt bt[N];
#pragma unroll
      for (int kk = 0; kk < N; kk++) wmma::load_matrix_sync(bt[kk], kh + (size_t)j * 16 * E + kk * 16, E);
      C c;
      wmma::fill_fragment(c, 0.0f);
#pragma unroll
      for (int kk = 0; kk < N; kk++) wmma::mma_sync(c, qa[kk], bt[kk], c);
      wmma::store_matrix_sync(s + j * 16, c, SF, wmma::mem_row_major);
    }
    __syncwarp();
    // Softmax of each row (as causal_softmax_fwd: f32, expf, times 1 / sum), query i sees
    // keys j <= i; bf16 P with zeros past the diagonal.
    for (int r = 0; r < 16; r++) {
      const int i = i0 + r;
      float *sr = s + r * SF;
      float m = -INFINITY;
      for (int j = lane; j <= i; j += 32) m = fmaxf(m, sr[j] * scale);
      m = warp_max(m);
      float sum = 0.0f;
      for (int j = lane; j <= i; j += 32) {
        const float e = expf(sr[j] * scale - m);
        sr[j] = e;
        sum += e;
      }
      const float inv = 1.0f / warp_sum(sum);
      for (int j = lane; j < T; j += 32) p[r * SH + j] = __float2bfloat16(j <= i ? sr[j] * inv : 0.0f);
    }
    __syncwarp();
    bf16 *P = out + (size_t)bh * T * T + (size_t)i0 * T;
    for (int c = lane; c < 16 * T / 8; c += 32) {
      const int r = c / (T / 8), col = (c % (T / 8)) * 8;
      *reinterpret_cast<uint4 *>(P + r * T + col) = *reinterpret_cast<const uint4 *>(p + r * SH + col);
    }
    // Y strip = P strip · v over key tiles j <= st.
    C acc[N];
#pragma unroll
    for (int n = 0; n < N; n++) wmma::fill_fragment(acc[n], 0.0f);
    for (int j = 0; j <= st; j++) {
      A a;
      B bv[N];
      wmma::load_matrix_sync(a, p + j * 16, SH);
#pragma unroll
      for (int n = 0; n < N; n++) wmma::load_matrix_sync(bv[n], vh + (size_t)j * 16 * E + n * 16, E);
#pragma unroll
      for (int n = 0; n < N; n++) wmma::mma_sync(acc[n], a, bv[n], acc[n]);
    }
    bf16 *Y = out + (size_t)Bn * H * T * T + ((size_t)b * T + i0) * ldy + (size_t)h * E;
    strip_out<N>(acc, s, SF, Y, ldy);
  }
}

// Backward. q, k, v (b, h, T, E), P (b, h, T, T), dY (b, T, h, E); out (3, b, h, T, E):
// ∂q, ∂k, ∂v. dP = dY vᵀ (f32, shared), dS = scale · P ⊙ (dP − Σ dP ⊙ P) (bf16, shared, all
// rows: ∂k reads its columns), then per strip ∂q = dS k, ∂k = dSᵀ q, ∂v = Pᵀ dY. Shared
// memory: per warp an f32 strip 16 × sf, and dS, T × sh bf16.
template <int E>
__device__ void attn_bwd(const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *pg,
                         const bf16 *dy, bf16 *out, int Bn, int H, int T, float scale) {
  using namespace attn;
  constexpr int N = E / 16;
  extern __shared__ float attn_bwd_sm[];
  const int bh = blockIdx.x, b = bh / H, h = bh % H, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int SF = sf(T, E), SH = sh(T), W = T / 16;
  float *s = attn_bwd_sm + warp * 16 * SF;
  bf16 *ds = reinterpret_cast<bf16 *>(attn_bwd_sm + (W / 2) * 16 * SF);
  const size_t head = (size_t)bh * T * E, ldy = (size_t)H * E;
  const bf16 *qh = q + head, *kh = k + head, *vh = v + head, *ph = pg + (size_t)bh * T * T;
  const bf16 *dyh = dy + (size_t)b * T * ldy + (size_t)h * E;
  for (int half = 0; half < 2; half++) {
    const int st = half ? W - 1 - warp : warp, i0 = st * 16;
    // dP of the strip, key tiles j <= st.
    A da[N];
#pragma unroll
    for (int kk = 0; kk < N; kk++) wmma::load_matrix_sync(da[kk], dyh + (size_t)i0 * ldy + kk * 16, ldy);
    for (int j = 0; j <= st; j++) {
      Bt bt[N];
#pragma unroll
      for (int kk = 0; kk < N; kk++) wmma::load_matrix_sync(bt[kk], vh + (size_t)j * 16 * E + kk * 16, E);
      C c;
      wmma::fill_fragment(c, 0.0f);
#pragma unroll
      for (int kk = 0; kk < N; kk++) wmma::mma_sync(c, da[kk], bt[kk], c);
      wmma::store_matrix_sync(s + j * 16, c, SF, wmma::mem_row_major);
    }
    __syncwarp();
    // dS rows (as causal_softmax_bwd: scale · y · (g − dot)), zeros past the diagonal.
    for (int r = 0; r < 16; r++) {
      const int i = i0 + r;
      const float *sr = s + r * SF;
      const bf16 *pr = ph + (size_t)i * T;
      float dot = 0.0f;
      for (int j = lane; j <= i; j += 32) dot += sr[j] * to_f(pr[j]);
      dot = warp_sum(dot);
      for (int j = lane; j < T; j += 32)
        ds[i * SH + j] = __float2bfloat16(j <= i ? scale * to_f(pr[j]) * (sr[j] - dot) : 0.0f);
    }
    __syncwarp();
  }
  __syncthreads();
  const size_t plane = (size_t)Bn * H * T * E;
  for (int half = 0; half < 2; half++) {
    const int st = half ? W - 1 - warp : warp, i0 = st * 16;
    bf16 *dq = out + head + (size_t)i0 * E, *dk = dq + plane, *dv = dq + 2 * plane;
    C acc[N];
    // ∂q strip = dS[strip, j <= st] · k[j].
#pragma unroll
    for (int n = 0; n < N; n++) wmma::fill_fragment(acc[n], 0.0f);
    for (int j = 0; j <= st; j++) {
      A a;
      B bk[N];
      wmma::load_matrix_sync(a, ds + i0 * SH + j * 16, SH);
#pragma unroll
      for (int n = 0; n < N; n++) wmma::load_matrix_sync(bk[n], kh + (size_t)j * 16 * E + n * 16, E);
#pragma unroll
      for (int n = 0; n < N; n++) wmma::mma_sync(acc[n], a, bk[n], acc[n]);
    }
    strip_out<N>(acc, s, SF, dq, E);
    // ∂k of key rows [i0, i0 + 16) = Σ over query tiles i >= st of dS[i, strip]ᵀ · q[i].
#pragma unroll
    for (int n = 0; n < N; n++) wmma::fill_fragment(acc[n], 0.0f);
    for (int i = st; i < W; i++) {
      At a;
      B bq[N];
      wmma::load_matrix_sync(a, ds + i * 16 * SH + i0, SH);
#pragma unroll
      for (int n = 0; n < N; n++) wmma::load_matrix_sync(bq[n], qh + (size_t)i * 16 * E + n * 16, E);
#pragma unroll
      for (int n = 0; n < N; n++) wmma::mma_sync(acc[n], a, bq[n], acc[n]);
    }
    strip_out<N>(acc, s, SF, dk, E);
    // ∂v of the strip's key rows = Σ over query tiles i >= st of P[i, strip]ᵀ · dY[i].
#pragma unroll
    for (int n = 0; n < N; n++) wmma::fill_fragment(acc[n], 0.0f);
    for (int i = st; i < W; i++) {
      At a;
      B bd[N];
      wmma::load_matrix_sync(a, ph + (size_t)i * 16 * T + i0, T);
#pragma unroll
      for (int n = 0; n < N; n++) wmma::load_matrix_sync(bd[n], dyh + (size_t)i * 16 * ldy + n * 16, ldy);
#pragma unroll
      for (int n = 0; n < N; n++) wmma::mma_sync(acc[n], a, bd[n], acc[n]);
    }
    strip_out<N>(acc, s, SF, dv, E);
  }
}

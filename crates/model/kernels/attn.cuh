// Causal attention for bf16 on tensor cores (wmma 16 × 16 × 16, f32 accumulate), one block
// per (batch, head), T / 16 warps; warp w owns query rows [16w, 16w + 16). Replaces the
// scores GEMM, the softmax kernel, the values GEMM and the head transpose of the forward
// (and their four GEMMs, softmax backward and transpose in the backward): the scores and
// their gradient stay in shared memory as f32. T (the sequence) and E (the head width) are
// multiples of 16, T <= 128 and E <= 128. Part of fused.cu (see its header for the
// kernels' arguments).
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

// A warp's 16 × E f32 tile strip s (row stride ld) to 16 bf16 rows of `out` (row stride
// ldo), 8 elements per lane and store.
__device__ __forceinline__ void strip_out(const float *s, int ld, bf16 *out, size_t ldo, int E) {
  __syncwarp();
  const int lane = threadIdx.x & 31, per = E / 8;
  for (int c = lane; c < 16 * per; c += 32) {
    const int r = c / per, col = (c % per) * 8;
    store16(out + r * ldo + col, s + r * ld + col);
  }
  __syncwarp();
}
}  // namespace attn

// Forward. q, k, v (b, h, T, E); out: P = softmax(scale · q kᵀ, causal) (b, h, T, T), then
// Y = P v as (b, T, h, E) (the output projection's rows). Shared memory: per warp an f32
// strip 16 × sf and a bf16 strip 16 × sh.
__device__ void attn_fwd(const bf16 *q, const bf16 *k, const bf16 *v, bf16 *out, int Bn, int H,
                         int T, int E, float scale) {
  using namespace attn;
  extern __shared__ float attn_fwd_sm[];
  const int bh = blockIdx.x, b = bh / H, h = bh % H, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int SF = sf(T, E), SH = sh(T), W = T / 16, i0 = warp * 16;
  float *s = attn_fwd_sm + warp * 16 * SF;
  bf16 *p = reinterpret_cast<bf16 *>(attn_fwd_sm + W * 16 * SF) + warp * 16 * SH;
  const size_t head = (size_t)bh * T * E;
  const bf16 *qh = q + head, *kh = k + head, *vh = v + head;
  // Scores of the strip, key tiles j <= warp (the rest is masked).
  for (int j = 0; j <= warp; j++) {
    C c;
    wmma::fill_fragment(c, 0.0f);
    for (int kk = 0; kk < E; kk += 16) {
      A a;
      Bt bt;
      wmma::load_matrix_sync(a, qh + (size_t)i0 * E + kk, E);
      wmma::load_matrix_sync(bt, kh + (size_t)j * 16 * E + kk, E);
      wmma::mma_sync(c, a, bt, c);
    }
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
  // Y strip = P strip · v over key tiles j <= warp.
  for (int n = 0; n < E; n += 16) {
    C c;
    wmma::fill_fragment(c, 0.0f);
    for (int j = 0; j <= warp; j++) {
      A a;
      B bv;
      wmma::load_matrix_sync(a, p + j * 16, SH);
      wmma::load_matrix_sync(bv, vh + (size_t)j * 16 * E + n, E);
      wmma::mma_sync(c, a, bv, c);
    }
    wmma::store_matrix_sync(s + n, c, SF, wmma::mem_row_major);
  }
  const size_t ldy = (size_t)H * E;
  bf16 *Y = out + (size_t)Bn * H * T * T + ((size_t)b * T + i0) * ldy + (size_t)h * E;
  strip_out(s, SF, Y, ldy, E);
}

// Backward. q, k, v (b, h, T, E), P (b, h, T, T), dY (b, T, h, E); out (3, b, h, T, E):
// ∂q, ∂k, ∂v. dP = dY vᵀ (f32, shared), dS = scale · P ⊙ (dP − Σ dP ⊙ P) (bf16, shared, all
// rows: ∂k reads its columns), then ∂q = dS k, ∂k = dSᵀ q, ∂v = Pᵀ dY per strip. Shared
// memory: per warp an f32 strip 16 × sf, and dS, T × sh bf16.
__device__ void attn_bwd(const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *pg,
                         const bf16 *dy, bf16 *out, int Bn, int H, int T, int E, float scale) {
  using namespace attn;
  extern __shared__ float attn_bwd_sm[];
  const int bh = blockIdx.x, b = bh / H, h = bh % H, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int SF = sf(T, E), SH = sh(T), W = T / 16, i0 = warp * 16;
  float *s = attn_bwd_sm + warp * 16 * SF;
  bf16 *ds = reinterpret_cast<bf16 *>(attn_bwd_sm + W * 16 * SF);
  const size_t head = (size_t)bh * T * E, ldy = (size_t)H * E;
  const bf16 *qh = q + head, *kh = k + head, *vh = v + head, *ph = pg + (size_t)bh * T * T;
  const bf16 *dyh = dy + (size_t)b * T * ldy + (size_t)h * E;
  // dP of the strip, key tiles j <= warp.
  for (int j = 0; j <= warp; j++) {
    C c;
    wmma::fill_fragment(c, 0.0f);
    for (int kk = 0; kk < E; kk += 16) {
      A a;
      Bt bt;
      wmma::load_matrix_sync(a, dyh + (size_t)i0 * ldy + kk, ldy);
      wmma::load_matrix_sync(bt, vh + (size_t)j * 16 * E + kk, E);
      wmma::mma_sync(c, a, bt, c);
    }
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
  __syncthreads();
  const size_t plane = (size_t)Bn * H * T * E;
  bf16 *dq = out + head + (size_t)i0 * E, *dk = dq + plane, *dv = dq + 2 * plane;
  // ∂q strip = dS[strip, j <= warp] · k[j].
  for (int n = 0; n < E; n += 16) {
    C c;
    wmma::fill_fragment(c, 0.0f);
    for (int j = 0; j <= warp; j++) {
      A a;
      B bk;
      wmma::load_matrix_sync(a, ds + i0 * SH + j * 16, SH);
      wmma::load_matrix_sync(bk, kh + (size_t)j * 16 * E + n, E);
      wmma::mma_sync(c, a, bk, c);
    }
    wmma::store_matrix_sync(s + n, c, SF, wmma::mem_row_major);
  }
  strip_out(s, SF, dq, E, E);
  // ∂k of key rows [16w, 16w + 16) = Σ over query tiles i >= warp of dS[i, strip]ᵀ · q[i].
  for (int n = 0; n < E; n += 16) {
    C c;
    wmma::fill_fragment(c, 0.0f);
    for (int i = warp; i < W; i++) {
      At a;
      B bq;
      wmma::load_matrix_sync(a, ds + i * 16 * SH + i0, SH);
      wmma::load_matrix_sync(bq, qh + (size_t)i * 16 * E + n, E);
      wmma::mma_sync(c, a, bq, c);
    }
    wmma::store_matrix_sync(s + n, c, SF, wmma::mem_row_major);
  }
  strip_out(s, SF, dk, E, E);
  // ∂v of key rows of the strip = Σ over query tiles i >= warp of P[i, strip]ᵀ · dY[i].
  for (int n = 0; n < E; n += 16) {
    C c;
    wmma::fill_fragment(c, 0.0f);
    for (int i = warp; i < W; i++) {
      At a;
      B bd;
      wmma::load_matrix_sync(a, ph + (size_t)i * 16 * T + i0, T);
      wmma::load_matrix_sync(bd, dyh + (size_t)i * 16 * ldy + n, ldy);
      wmma::mma_sync(c, a, bd, c);
    }
    wmma::store_matrix_sync(s + n, c, SF, wmma::mem_row_major);
  }
  strip_out(s, SF, dv, E, E);
}

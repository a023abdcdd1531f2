// Causal attention for bf16 on tensor cores (wmma 16 × 16 × 16, f32 accumulate), one block
// per (batch, head). Replaces the scores GEMM, the softmax kernel, the values GEMM and the
// head transpose of the forward (and their four GEMMs, softmax backward and transpose in the
// backward): the scores and their gradient stay in shared memory as f32. T (the sequence)
// is a multiple of 32, at most 128; E (the head width) a multiple of 16, at most 128 (a
// template parameter, so the loops over it unroll and their tile loads issue together).
// The T / 16 row strips of 16 queries are paired, w with T/16 − 1 − w: under the causal mask
// every pair then has the same number of tiles. Each pair has two warps (T / 16 warps in
// all), which split its key tiles, rows and output tiles between them. The operands that every
// warp reads tile by tile (k and v; in the backward also q, then dY) are first copied to
// shared memory by the whole block, 16 bytes per thread and load: read one tile at a time
// from global memory, each step waited a full memory latency (run 34: 105 µs a forward,
// 250 µs a backward per layer on nvidia-h100-x1). With one warp per pair (run 35: 88 and
// 126 µs per layer on nvidia-h200) each warp's chain of dependent tile steps was the limit. Part of fused.cu (see its header for the
// kernels' arguments).
#pragma once
#include "mma.cuh"
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

// 16 bytes from global src to shared dst by cp.async: issued, not waited (wait_all is).
__device__ __forceinline__ void async16(bf16 *dst, const bf16 *src) { mma::cp16(mma::smem(dst), src); }
__device__ __forceinline__ void wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// q, k and v, T rows of E each, from the qkv rows (q's first; k's ldy on, v's 2 · ldy;
// rows ldr apart) to shared rows of E + 8, q and k turned by RoPE's angle (cos, sin: (T,
// E / 2) tables) as qkv_rope_split turns them (f32, rounded once). Every load is in flight
// at once: v's by cp.async (waited at the end), then q's and k's 16-byte chunks with their
// angles, G chunks of each a thread, before any is turned and stored. Until session 58 a
// loop took a chunk at a time, each waiting a memory latency: 12 in a row at E = 64, the
// kernels' largest stall (call 325). The block has 2T threads (T / 16 warps), so a thread
// has E / 16 chunks of each.
template <int E>
__device__ __forceinline__ void stage_qkv(const bf16 *rows, size_t ldy, size_t ldr, bf16 *qs, bf16 *ks,
                                          bf16 *vs, int T, const float *cos_t, const float *sin_t) {
  constexpr int CH = E / 8, PER = E / 16, G = PER < 4 ? PER : 4, LE = E + 8;
  const int n = T * CH;
#pragma unroll
  for (int i = 0; i < PER; i++) {
    const int c = threadIdx.x + i * blockDim.x, r = c / CH, col = (c % CH) * 8;
    if (c < n) async16(vs + r * LE + col, rows + 2 * ldy + r * ldr + col);
  }
#pragma unroll
  for (int g = 0; g < PER; g += G) {
    uint4 q[G], k[G];
    float4 cs[G][2], sn[G][2];
#pragma unroll
    for (int i = 0; i < G; i++) {
      const int c = threadIdx.x + (g + i) * blockDim.x, r = c / CH, col = (c % CH) * 8;
      if (c >= n) continue;
      q[i] = *reinterpret_cast<const uint4 *>(rows + r * ldr + col);
      k[i] = *reinterpret_cast<const uint4 *>(rows + ldy + r * ldr + col);
      const int at = r * (E / 2) + col / 2;
      cs[i][0] = *reinterpret_cast<const float4 *>(cos_t + at);
      cs[i][1] = *reinterpret_cast<const float4 *>(cos_t + at + 4);
      sn[i][0] = *reinterpret_cast<const float4 *>(sin_t + at);
      sn[i][1] = *reinterpret_cast<const float4 *>(sin_t + at + 4);
    }
#pragma unroll
    for (int i = 0; i < G; i++) {
      const int c = threadIdx.x + (g + i) * blockDim.x, r = c / CH, col = (c % CH) * 8;
      if (c >= n) continue;
      const float *ca = reinterpret_cast<const float *>(cs[i]), *sa = reinterpret_cast<const float *>(sn[i]);
      float f[8];
      load16(reinterpret_cast<const bf16 *>(&q[i]), f);
      rope_turn4(f, ca, sa, false);
      store16(qs + r * LE + col, f);
      load16(reinterpret_cast<const bf16 *>(&k[i]), f);
      rope_turn4(f, ca, sa, false);
      store16(ks + r * LE + col, f);
    }
  }
  wait_all();
}

// rows × E elements from src (row stride lds) to shared rows of E + 8, by the whole block's
// cp.async: issued and waited.
template <int E> __device__ __forceinline__ void stage_async(const bf16 *src, size_t lds, bf16 *dst, int rows) {
  constexpr int CH = E / 8, LE = E + 8;
  for (int c = threadIdx.x; c < rows * CH; c += blockDim.x) {
    const int r = c / CH, col = (c % CH) * 8;
    async16(dst + r * LE + col, src + r * lds + col);
  }
  wait_all();
}

// A warp's share of a 16 × E output strip: accumulators acc[m] for the 16-column tiles
// n = sub + 2m (m < count), to the f32 strip s (row stride ld) at their columns, then as
// bf16 to the same columns of 16 rows of `out` (row stride ldo), 8 elements per lane; when
// `unrotate`, each pair of row r turned back by RoPE's angle at position t0 + r (as
// qkv_rope_merge does).
template <int M>
__device__ __forceinline__ void part_out(C (&acc)[M], int sub, int count, float *s, int ld, bf16 *out,
                                         size_t ldo, const float *cos_t = nullptr,
                                         const float *sin_t = nullptr, int t0 = 0, bool unrotate = false,
                                         int E = 0) {
#pragma unroll
  for (int m = 0; m < M; m++)
    if (m < count) wmma::store_matrix_sync(s + (sub + 2 * m) * 16, acc[m], ld, wmma::mem_row_major);
  __syncwarp();
  const int lane = threadIdx.x & 31;
  for (int c = lane; c < 16 * 2 * count; c += 32) {
    const int r = c / (2 * count), q = c % (2 * count), col = (sub + 2 * (q >> 1)) * 16 + (q & 1) * 8;
    if (!unrotate) {
      store16(out + r * ldo + col, s + r * ld + col);
      continue;
    }
    float f[8];
#pragma unroll
    for (int k = 0; k < 8; k++) f[k] = s[r * ld + col + k];
    const int at = (t0 + r) * (E / 2) + col / 2;
    rope_turn4(f, cos_t + at, sin_t + at, true);
    store16(out + r * ldo + col, f);
  }
  __syncwarp();
}
}  // namespace attn

// Forward. qkv: the qkv projection's rows (b, T, 3, h, E), q and k roped as they are staged;
// out: P = softmax(scale · q kᵀ, causal) (b, h, T, T), then Y = P v as (b, T, h, E) (the
// output projection's rows). Shared memory: k, v and q (T rows of E + 8), then per pair an
// f32 strip 16 × sf and a bf16 strip 16 × sh.
template <int E>
__device__ void attn_fwd(const bf16 *qkv, const float *cos_t, const float *sin_t, bf16 *out, int Bn,
                         int H, int T, float scale) {
  using namespace attn;
  constexpr int N = E / 16, LE = E + 8, M = (N + 1) / 2;
  extern __shared__ float attn_fwd_sm[];
  const int bh = blockIdx.x, b = bh / H, h = bh % H, lane = threadIdx.x & 31;
  const int pair = threadIdx.x >> 6, sub = (threadIdx.x >> 5) & 1, count = (N - sub + 1) / 2;
  const int SF = sf(T, E), SH = sh(T), W = T / 16;
  bf16 *ks = reinterpret_cast<bf16 *>(attn_fwd_sm), *vs = ks + T * LE, *qs = vs + T * LE;
  float *strips = reinterpret_cast<float *>(qs + T * LE);
  float *s = strips + pair * 16 * SF;
  bf16 *p = reinterpret_cast<bf16 *>(strips + (W / 2) * 16 * SF) + pair * 16 * SH;
  const size_t ldy = (size_t)H * E, ldr = 3 * ldy;
  const bf16 *rows = qkv + (size_t)b * T * ldr + (size_t)h * E;
  stage_qkv<E>(rows, ldy, ldr, qs, ks, vs, T, cos_t, sin_t);
  __syncthreads();
  for (int half = 0; half < 2; half++) {
    const int st = half ? W - 1 - pair : pair, i0 = st * 16;
    // Scores of the strip, key tiles j <= st (the rest is masked); this warp's j = sub + 2m.
    A qa[N];
#pragma unroll
    for (int kk = 0; kk < N; kk++) wmma::load_matrix_sync(qa[kk], qs + i0 * LE + kk * 16, LE);
    for (int j = sub; j <= st; j += 2) {
      Bt bt[N];
#pragma unroll
      for (int kk = 0; kk < N; kk++) wmma::load_matrix_sync(bt[kk], ks + j * 16 * LE + kk * 16, LE);
      C c;
      wmma::fill_fragment(c, 0.0f);
#pragma unroll
      for (int kk = 0; kk < N; kk++) wmma::mma_sync(c, qa[kk], bt[kk], c);
      wmma::store_matrix_sync(s + j * 16, c, SF, wmma::mem_row_major);
    }
    __syncthreads();
    // Softmax of each row (as causal_softmax_fwd: f32, expf, times 1 / sum): query i sees
    // keys j <= i; bf16 P with zeros past the diagonal. This warp's 8 rows, four at a time,
    // lane l holding columns l + 32m, so the four rows' reductions run side by side.
    for (int r0 = sub * 8; r0 < sub * 8 + 8; r0 += 4) {
      float x[4][4], mx[4], sum[4];
#pragma unroll
      for (int a = 0; a < 4; a++) {
        const int i = i0 + r0 + a;
        mx[a] = -INFINITY;
#pragma unroll
        for (int m = 0; m < 4; m++) {
          const int j = lane + 32 * m;
          x[a][m] = (j <= i && j < T) ? s[(r0 + a) * SF + j] * scale : -INFINITY;
          mx[a] = fmaxf(mx[a], x[a][m]);
        }
      }
#pragma unroll
      for (int a = 0; a < 4; a++) mx[a] = warp_max(mx[a]);
#pragma unroll
      for (int a = 0; a < 4; a++) {
        sum[a] = 0.0f;
#pragma unroll
        for (int m = 0; m < 4; m++) {
          x[a][m] = expf(x[a][m] - mx[a]);
          sum[a] += x[a][m];
        }
      }
#pragma unroll
      for (int a = 0; a < 4; a++) sum[a] = warp_sum(sum[a]);
#pragma unroll
      for (int a = 0; a < 4; a++) {
        const float inv = 1.0f / sum[a];
#pragma unroll
        for (int m = 0; m < 4; m++) {
          const int j = lane + 32 * m;
          if (j < T) p[(r0 + a) * SH + j] = __float2bfloat16(x[a][m] * inv);
        }
      }
    }
    __syncwarp();
    bf16 *P = out + (size_t)bh * T * T + (size_t)i0 * T;
    for (int c = lane; c < 8 * T / 8; c += 32) {
      const int r = sub * 8 + c / (T / 8), col = (c % (T / 8)) * 8;
      *reinterpret_cast<uint4 *>(P + r * T + col) = *reinterpret_cast<const uint4 *>(p + r * SH + col);
    }
    __syncthreads();
    // Y strip = P strip · v over key tiles j <= st; this warp's output tiles n = sub + 2m.
    C acc[M];
#pragma unroll
    for (int m = 0; m < M; m++) wmma::fill_fragment(acc[m], 0.0f);
    for (int j = 0; j <= st; j++) {
      A a;
      B bv[M];
      wmma::load_matrix_sync(a, p + j * 16, SH);
#pragma unroll
      for (int m = 0; m < M; m++)
        if (m < count) wmma::load_matrix_sync(bv[m], vs + j * 16 * LE + (sub + 2 * m) * 16, LE);
#pragma unroll
      for (int m = 0; m < M; m++)
        if (m < count) wmma::mma_sync(acc[m], a, bv[m], acc[m]);
    }
    bf16 *Y = out + (size_t)Bn * H * T * T + ((size_t)b * T + i0) * ldy + (size_t)h * E;
    part_out<M>(acc, sub, count, s, SF, Y, ldy);
    __syncthreads();
  }
}

// Backward. qkv rows as the forward's, P (b, h, T, T), Y and dY (b, T, h, E); out: ∂qkv in
// the qkv rows' layout (b, T, 3, h, E), ∂q and ∂k turned back by RoPE's angle. Per query strip, tile by tile: dP = dY vᵀ, dS = scale · P ⊙ (dP − D) with
// D = Σ_j dP ⊙ P = dY · Y per row (the output's rows, as FlashAttention does), in bf16 into
// a shared T × T dS; then per strip ∂q = dS k, ∂k = dSᵀ q, ∂v = Pᵀ dY. Shared memory: k, v
// (dY once dP is done) and q (T rows of E + 8), dS (T rows of sh), per pair an f32 strip
// 16 × sc (a 16 × 16 scratch tile per warp while dS is made).
template <int E>
__device__ void attn_bwd(const bf16 *qkv, const float *cos_t, const float *sin_t, const bf16 *pg,
                         const bf16 *y, const bf16 *dy, bf16 *out, int Bn, int H, int T,
                         float scale) {
  using namespace attn;
  constexpr int N = E / 16, LE = E + 8, SC = (E > 32 ? E : 32) + 4, M = (N + 1) / 2;
  extern __shared__ float attn_bwd_sm[];
  const int bh = blockIdx.x, b = bh / H, h = bh % H, lane = threadIdx.x & 31;
  const int pair = threadIdx.x >> 6, sub = (threadIdx.x >> 5) & 1, count = (N - sub + 1) / 2;
  const int SH = sh(T), W = T / 16;
  bf16 *ks = reinterpret_cast<bf16 *>(attn_bwd_sm), *vs = ks + T * LE, *qs = vs + T * LE;
  bf16 *ds = qs + T * LE;
  float *s = reinterpret_cast<float *>(ds + T * SH) + pair * 16 * SC;
  const size_t ldy = (size_t)H * E, ldr = 3 * ldy;
  const bf16 *ph = pg + (size_t)bh * T * T;
  const bf16 *dyh = dy + (size_t)b * T * ldy + (size_t)h * E, *yh = y + (size_t)b * T * ldy + (size_t)h * E;
  const bf16 *rows = qkv + (size_t)b * T * ldr + (size_t)h * E;
  stage_qkv<E>(rows, ldy, ldr, qs, ks, vs, T, cos_t, sin_t);
  __syncthreads();
  // Lane l works on row l / 2 of a tile, columns (l & 1) · 8 .. + 8.
  const int rr = lane >> 1, cc = (lane & 1) * 8;
  float *scratch = s + sub * 16;  // this warp's 16 × 16 tile (row stride SC)
  for (int half = 0; half < 2; half++) {
    const int st = half ? W - 1 - pair : pair, i0 = st * 16;
    // D of the lane's row: half of the row's dY · Y per lane, the pair summed.
    float dot = 0.0f;
#pragma unroll
    for (int c = 0; c < E / 2; c += 8) {
      float a[8], o[8];
      const size_t off = (size_t)(i0 + rr) * ldy + (lane & 1) * (E / 2) + c;
      load16(dyh + off, a);
      load16(yh + off, o);
#pragma unroll
      for (int t = 0; t < 8; t++) dot += a[t] * o[t];
    }
    dot += __shfl_xor_sync(0xffffffff, dot, 1);
    // The lane's 8 entries of P in this warp's key tiles j = sub + 2m, loaded together.
    uint4 pre[4];
#pragma unroll
    for (int m = 0; m < 4; m++)
      if (sub + 2 * m <= st)
        pre[m] = *reinterpret_cast<const uint4 *>(ph + (size_t)(i0 + rr) * T + (sub + 2 * m) * 16 + cc);
    A da[N];
#pragma unroll
    for (int kk = 0; kk < N; kk++) wmma::load_matrix_sync(da[kk], dyh + (size_t)i0 * ldy + kk * 16, ldy);
#pragma unroll
    for (int m = 0; m < 4; m++) {
      const int j = sub + 2 * m;
      if (j > st) break;
      Bt bt[N];
#pragma unroll
      for (int kk = 0; kk < N; kk++) wmma::load_matrix_sync(bt[kk], vs + j * 16 * LE + kk * 16, LE);
      C c;
      wmma::fill_fragment(c, 0.0f);
#pragma unroll
      for (int kk = 0; kk < N; kk++) wmma::mma_sync(c, da[kk], bt[kk], c);
      wmma::store_matrix_sync(scratch, c, SC, wmma::mem_row_major);
      __syncwarp();
      const bf16 *pv = reinterpret_cast<const bf16 *>(&pre[m]);
      float o[8];
#pragma unroll
      for (int t = 0; t < 8; t++) o[t] = scale * to_f(pv[t]) * (scratch[rr * SC + cc + t] - dot);
      store16(ds + (i0 + rr) * SH + j * 16 + cc, o);
      __syncwarp();
    }
  }
  __syncthreads();
  stage_async<E>(dyh, ldy, vs, T);  // v is done with: dY in its place
  __syncthreads();
  for (int half = 0; half < 2; half++) {
    const int st = half ? W - 1 - pair : pair, i0 = st * 16;
    bf16 *dq = out + ((size_t)b * T + i0) * ldr + (size_t)h * E, *dk = dq + ldy, *dv = dq + 2 * ldy;
    C acc[M];
    // ∂q strip = dS[strip, j <= st] · k[j]; this warp's output tiles n = sub + 2m.
#pragma unroll
    for (int m = 0; m < M; m++) wmma::fill_fragment(acc[m], 0.0f);
    for (int j = 0; j <= st; j++) {
      A a;
      B bk[M];
      wmma::load_matrix_sync(a, ds + i0 * SH + j * 16, SH);
#pragma unroll
      for (int m = 0; m < M; m++)
        if (m < count) wmma::load_matrix_sync(bk[m], ks + j * 16 * LE + (sub + 2 * m) * 16, LE);
#pragma unroll
      for (int m = 0; m < M; m++)
        if (m < count) wmma::mma_sync(acc[m], a, bk[m], acc[m]);
    }
    part_out<M>(acc, sub, count, s, SC, dq, ldr, cos_t, sin_t, i0, true, E);
    // ∂k of key rows [i0, i0 + 16) = Σ over query tiles i >= st of dS[i, strip]ᵀ · q[i].
#pragma unroll
    for (int m = 0; m < M; m++) wmma::fill_fragment(acc[m], 0.0f);
    for (int i = st; i < W; i++) {
      At a;
      B bq[M];
      wmma::load_matrix_sync(a, ds + i * 16 * SH + i0, SH);
#pragma unroll
      for (int m = 0; m < M; m++)
        if (m < count) wmma::load_matrix_sync(bq[m], qs + i * 16 * LE + (sub + 2 * m) * 16, LE);
#pragma unroll
      for (int m = 0; m < M; m++)
        if (m < count) wmma::mma_sync(acc[m], a, bq[m], acc[m]);
    }
    part_out<M>(acc, sub, count, s, SC, dk, ldr, cos_t, sin_t, i0, true, E);
    // ∂v of the strip's key rows = Σ over query tiles i >= st of P[i, strip]ᵀ · dY[i]; the
    // P tiles (global) loaded together first.
    At pa[8];
#pragma unroll
    for (int m = 0; m < 8; m++)
      if (st + m < W) wmma::load_matrix_sync(pa[m], ph + (size_t)(st + m) * 16 * T + i0, T);
#pragma unroll
    for (int m = 0; m < M; m++) wmma::fill_fragment(acc[m], 0.0f);
#pragma unroll
    for (int i = 0; i < 8; i++) {
      if (st + i >= W) break;
      B bd[M];
#pragma unroll
      for (int m = 0; m < M; m++)
        if (m < count) wmma::load_matrix_sync(bd[m], vs + (st + i) * 16 * LE + (sub + 2 * m) * 16, LE);
#pragma unroll
      for (int m = 0; m < M; m++)
        if (m < count) wmma::mma_sync(acc[m], pa[i], bd[m], acc[m]);
    }
    part_out<M>(acc, sub, count, s, SC, dv, ldr);
  }
}

// Causal attention for sequences longer than attn.cuh's 128 tokens, tiled as FlashAttention-2
// does: no T × T matrix is written. T is a multiple of 64, E (the head width) of 16, at most
// 128. Tiles of 64 queries or keys, four warps of 16 rows each, bf16 tensor cores (wmma
// 16 × 16 × 16, f32 accumulate); q and k roped as they are staged, as attn.cuh does.
//
// Forward: a block per (batch, head, query tile), the heaviest tiles (last queries) first. It
// walks the key tiles up to the diagonal with the online softmax (running max m and sum l of
// each row, the output accumulated in registers and rescaled row by row) and writes Y and
// each row's log-sum-exp L = m + ln l (f32, (b, h, T)), all the backward keeps.
// Backward: two kinds of block in one launch, both deterministic (no atomics, so a replayed
// step repeats its bits): a key tile's ∂k and ∂v over the query tiles at and after it, and a
// query tile's ∂q over the key tiles up to it. Each makes P = exp(scale · q kᵀ − L) and
// dP = dY vᵀ again; dS = scale · P ⊙ (dP − D) with D = dY · Y per row (flash_dot, launched
// first). The two kinds make S and dP twice (seven tile GEMMs per pair of tiles where
// FlashAttention's atomic ∂q takes five). Each tile pair's loads are all issued before their
// stores (stage2): per-chunk waits had made the first version 13 % slower (calls 261-263).
// Part of fused.cu (see its header for the kernels' arguments).
#pragma once
#include "attn.cuh"

namespace flash {
using namespace nvcuda;
using attn::A;
using attn::B;
using attn::Bt;
using attn::C;
constexpr int BT = 64;     // rows of a query or key tile
constexpr int SF = BT + 4; // row stride (f32) of a warp's 16 × 64 scratch
constexpr int PB = BT + 8; // row stride (bf16) of a warp's 16 × 64 strip
// Exponentials are taken base 2 (one ex2 instruction; expf's range reduction took more):
// exp(x) = 2^(x · log2 e); L stays natural.
constexpr float LOG2E = 1.4426950408889634f, LN2 = 0.6931471805599453f;

// The 32 scratch entries of row r, columns half · 32 …, 16 bytes a load (row stride SF).
__device__ __forceinline__ void row_half(const float *s, int r, int half, float (&v)[32]) {
#pragma unroll
  for (int c = 0; c < 32; c += 4) {
    const float4 q = *reinterpret_cast<const float4 *>(s + r * SF + half * 32 + c);
    v[c] = q.x;
    v[c + 1] = q.y;
    v[c + 2] = q.z;
    v[c + 3] = q.w;
  }
}

// X = a · bᵀ for a warp's 16 rows of a (row stride LE in shared memory) against the 64 rows
// of a tile b: four 16 × 16 tiles to the f32 scratch s (row stride SF). One accumulator at
// a time (the backward's registers are its ∂ accumulators'; a's fragments loaded for each
// tile took 70 registers more at E = 64, and spilled at 128).
template <int E>
__device__ __forceinline__ void rows_by_tile(const bf16 *a, const bf16 *b, float *s) {
  constexpr int N = E / 16, LE = E + 8;
#pragma unroll
  for (int n = 0; n < 4; n++) {
    C c;
    wmma::fill_fragment(c, 0.0f);
#pragma unroll
    for (int kk = 0; kk < N; kk++) {
      A fa;
      Bt fb;
      wmma::load_matrix_sync(fa, a + kk * 16, LE);
      wmma::load_matrix_sync(fb, b + n * 16 * LE + kk * 16, LE);
      wmma::mma_sync(c, fa, fb, c);
    }
    wmma::store_matrix_sync(s + n * 16, c, SF, wmma::mem_row_major);
  }
  __syncwarp();
}

// The same with a's fragments already in registers (the forward's q, loaded once).
template <int E>
__device__ __forceinline__ void frags_by_tile(const A (&a)[E / 16], const bf16 *b, float *s) {
  constexpr int LE = E + 8;
#pragma unroll
  for (int n = 0; n < 4; n++) {
    C c;
    wmma::fill_fragment(c, 0.0f);
#pragma unroll
    for (int kk = 0; kk < E / 16; kk++) {
      Bt fb;
      wmma::load_matrix_sync(fb, b + n * 16 * LE + kk * 16, LE);
      wmma::mma_sync(c, a[kk], fb, c);
    }
    wmma::store_matrix_sync(s + n * 16, c, SF, wmma::mem_row_major);
  }
  __syncwarp();
}

// Which row of a 16 × 16 accumulator tile each of the lane's elements holds. wmma leaves
// the layout to the implementation, so it is read once, from a tile (in the scratch s)
// whose entries are their rows; every tile of the warp has the same layout.
__device__ __forceinline__ void rows_of(C &rows, float *s) {
  for (int c = threadIdx.x & 31; c < 256; c += 32) s[c] = (float)(c / 16);
  __syncwarp();
  wmma::load_matrix_sync(rows, s, 16, wmma::mem_row_major);
  __syncwarp();
}

// Each accumulator row times its row's factor f, which the lane pair (2r, 2r + 1) holds for
// row r.
template <int M>
__device__ __forceinline__ void scale_rows(C (&acc)[M], const C &rows, float f) {
#pragma unroll
  for (int i = 0; i < rows.num_elements; i++) {
    const float g = __shfl_sync(0xffffffff, f, 2 * (int)rows.x[i]);
#pragma unroll
    for (int n = 0; n < M; n++) acc[n].x[i] *= g;
  }
}

// acc[n] += strip · tile: a warp's 16 × 64 bf16 strip (row stride PB) by a 64 × E tile (row
// stride LE), for the E / 16 output tiles n.
template <int E>
__device__ __forceinline__ void strip_by_tile(C (&acc)[E / 16], const bf16 *strip, const bf16 *tile) {
  constexpr int N = E / 16, LE = E + 8;
  A fa[4];
#pragma unroll
  for (int kk = 0; kk < 4; kk++) wmma::load_matrix_sync(fa[kk], strip + kk * 16, PB);
#pragma unroll
  for (int n = 0; n < N; n++)
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
      B fb;
      wmma::load_matrix_sync(fb, tile + kk * 16 * LE + n * 16, LE);
      wmma::mma_sync(acc[n], fa[kk], fb, acc[n]);
    }
}

// A warp's 16 × E accumulators through the f32 staging s (row stride E + 4) to 16 bf16 rows of
// `out` (row stride ldo), the lane pair (2r, 2r + 1) writing row r in alternate 8-column
// chunks; when `unrotate`, each pair turned back by RoPE's angle at position p0 + r.
template <int E>
__device__ __forceinline__ void put(C (&acc)[E / 16], float *s, bf16 *out, size_t ldo,
                                    const float *cos_t, const float *sin_t, int p0, bool unrotate) {
  constexpr int OE = E + 4;
  __syncwarp();
#pragma unroll
  for (int n = 0; n < E / 16; n++) wmma::store_matrix_sync(s + n * 16, acc[n], OE, wmma::mem_row_major);
  __syncwarp();
  const int lane = threadIdx.x & 31, r = lane >> 1;
  for (int c = (lane & 1) * 8; c < E; c += 16) {
    float f[8];
#pragma unroll
    for (int k = 0; k < 8; k++) f[k] = s[r * OE + c + k];
    const int at = (p0 + r) * (E / 2) + c / 2;
    if (unrotate) rope_turn4(f, cos_t + at, sin_t + at, true);
    store16(out + r * ldo + c, f);
  }
  __syncwarp();
}

// Two 64-row tiles (x: roped by the tables from row p0 on, as attn::stage does; z: as it
// is), rows of E from global memory into shared tiles of row stride E + 8, by the block's
// 128 threads. Every load of both tiles is issued before the first store, so that the
// tiles wait one memory latency, not one per 16-byte chunk (attn::stage's loop waits each).
template <int E>
__device__ __forceinline__ void stage2(const bf16 *__restrict__ x, size_t ldx, bf16 *xs, const bf16 *__restrict__ z,
                                       size_t ldz, bf16 *zs, const float *__restrict__ cos_t,
                                       const float *__restrict__ sin_t, int p0) {
  constexpr int PER = BT * (E / 8) / 128, LE = E + 8;  // 16-byte chunks a thread, a tile
  uint4 vx[PER], vz[PER];
  float4 cs[PER], sn[PER];
#pragma unroll
  for (int i = 0; i < PER; i++) {
    const int c = threadIdx.x + i * 128, r = c / (E / 8), col = (c % (E / 8)) * 8;
    vx[i] = *reinterpret_cast<const uint4 *>(x + r * ldx + col);
    vz[i] = *reinterpret_cast<const uint4 *>(z + r * ldz + col);
    const int at = (p0 + r) * (E / 2) + col / 2;
    cs[i] = *reinterpret_cast<const float4 *>(cos_t + at);
    sn[i] = *reinterpret_cast<const float4 *>(sin_t + at);
  }
#pragma unroll
  for (int i = 0; i < PER; i++) {
    const int c = threadIdx.x + i * 128, r = c / (E / 8), col = (c % (E / 8)) * 8;
    *reinterpret_cast<uint4 *>(zs + r * LE + col) = vz[i];
    const bf16 *h = reinterpret_cast<const bf16 *>(&vx[i]);
    const float cc[4] = {cs[i].x, cs[i].y, cs[i].z, cs[i].w}, ss[4] = {sn[i].x, sn[i].y, sn[i].z, sn[i].w};
    float f[8];
#pragma unroll
    for (int k = 0; k < 8; k++) f[k] = to_f(h[k]);
    rope_turn4(f, cc, ss, false);
    store16(xs + r * LE + col, f);
  }
}
}  // namespace flash

// Forward. qkv: the qkv projection's rows (b, T, 3, h, E); y: (b, T, h, E); lse: (b, h, T).
// Shared memory: q, k, v tiles (64 rows of E + 8), then per warp an f32 scratch 16 × SF and a
// bf16 strip 16 × PB, or at the end the output's staging 16 × (E + 4) f32 (the larger of
// the two: fwd_warp). The output accumulates in registers, rescaled row by row.
template <int E> __host__ __device__ constexpr int fwd_warp() {
  return 16 * flash::SF + 8 * flash::PB > 16 * (E + 4) ? 16 * flash::SF + 8 * flash::PB : 16 * (E + 4);
}
template <int E>
__device__ void flash_fwd(const bf16 *qkv, const float *cos_t, const float *sin_t, bf16 *y, float *lse,
                          int Bn, int H, int T, float scale) {
  using namespace flash;
  constexpr int N = E / 16, LE = E + 8;
  extern __shared__ float flash_fwd_sm[];
  const int nt = T / BT, bh = blockIdx.x % (Bn * H), qt = nt - 1 - blockIdx.x / (Bn * H);
  const int b = bh / H, h = bh % H, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int r = lane >> 1, half = lane & 1, row = warp * 16 + r, i0 = qt * BT;
  bf16 *qs = reinterpret_cast<bf16 *>(flash_fwd_sm), *ks = qs + BT * LE, *vs = ks + BT * LE;
  float *s = reinterpret_cast<float *>(vs + BT * LE) + warp * fwd_warp<E>();
  bf16 *p = reinterpret_cast<bf16 *>(s + 16 * SF);
  const size_t ldy = (size_t)H * E, ldr = 3 * ldy;
  const bf16 *rows = qkv + (size_t)b * T * ldr + (size_t)h * E;
  attn::stage<E>(rows + (size_t)i0 * ldr, ldr, qs, LE, BT, cos_t + i0 * (E / 2), sin_t + i0 * (E / 2), true);
  C rid, acc[N];
  rows_of(rid, s);
#pragma unroll
  for (int n = 0; n < N; n++) wmma::fill_fragment(acc[n], 0.0f);
  __syncthreads();
  A qa[N];
#pragma unroll
  for (int kk = 0; kk < N; kk++) wmma::load_matrix_sync(qa[kk], qs + warp * 16 * LE + kk * 16, LE);
  float m = -INFINITY, l = 0.0f;  // the row's running max; this lane's half of its sum
  const float sl = scale * LOG2E;
  for (int j = 0; j <= qt; j++) {
    const int j0 = j * BT;
    __syncthreads();  // every warp is done with the last tile's k and v
    stage2<E>(rows + (size_t)j0 * ldr + ldy, ldr, ks, rows + (size_t)j0 * ldr + 2 * ldy, ldr, vs, cos_t, sin_t, j0);
    __syncthreads();
    frags_by_tile<E>(qa, ks, s);
    // The online softmax of row `row` over this tile, the lane's half of the columns.
    // In base-2 units: x = scale · log2 e · S, m the running max of x.
    float x[32], mx = -INFINITY;
    row_half(s, r, half, x);
#pragma unroll
    for (int c = 0; c < 32; c++) {
      const int col = half * 32 + c;
      x[c] = (j == qt && col > row) ? -INFINITY : x[c] * sl;
      mx = fmaxf(mx, x[c]);
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
    const float mn = fmaxf(m, mx), corr = exp2f(m - mn);
    float sum = 0.0f;
#pragma unroll
    for (int c = 0; c < 32; c++) {
      x[c] = exp2f(x[c] - mn);
      sum += x[c];
    }
    l = l * corr + sum;
    m = mn;
#pragma unroll
    for (int c = 0; c < 32; c += 8) store16(p + r * PB + half * 32 + c, x + c);
    __syncwarp();
    // O = corr · O + P v over the tile's keys.
    scale_rows<N>(acc, rid, corr);
    strip_by_tile<E>(acc, p, vs);
    __syncwarp();
  }
  l += __shfl_xor_sync(0xffffffff, l, 1);
  scale_rows<N>(acc, rid, 1.0f / l);
  put<E>(acc, s, y + ((size_t)b * T + i0 + warp * 16) * ldy + (size_t)h * E, ldy, cos_t, sin_t, 0, false);
  if (!half) lse[(size_t)bh * T + i0 + row] = (m + log2f(l)) * LN2;
}

// D = dY · Y of every row and head (b, h, T), f32, a thread per (b, t, h): the backward's
// blocks read it as they read L.
template <int E>
__device__ void flash_dot(const bf16 *y, const bf16 *dy, float *out, int Bn, int H, int T) {
  const size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;  // (b, t, h)
  if (i >= (size_t)Bn * T * H) return;
  const int h = i % H, t = (i / H) % T, b = i / ((size_t)H * T);
  float d = 0.0f;
#pragma unroll
  for (int c = 0; c < E; c += 8) {
    float a[8], o[8];
    load16(dy + i * E + c, a);
    load16(y + i * E + c, o);
#pragma unroll
    for (int k = 0; k < 8; k++) d += a[k] * o[k];
  }
  out[((size_t)b * H + h) * T + t] = d;
}

// Backward. qkv rows, L and D (b, h, T), dY (b, T, h, E); out: ∂qkv in the rows' layout
// (b, T, 3, h, E), ∂q and ∂k turned back by RoPE's angle. Block 2i + 1 makes ∂k, ∂v of a key
// tile, block 2i the ∂q of a query tile; the heaviest tiles first. Shared memory: four tiles
// (64 rows of E + 8: q, dY, k, v), the L and D of 64 query rows (f32), per warp an f32
// scratch 16 × SF and two bf16 strips 16 × PB (P, dS), which stage the output at the end.
template <int E>
__device__ void flash_bwd(const bf16 *qkv, const float *cos_t, const float *sin_t, const float *lse,
                          const float *dot, const bf16 *dy, bf16 *out, int Bn, int H, int T, float scale) {
  using namespace flash;
  constexpr int N = E / 16, LE = E + 8;
  extern __shared__ float flash_bwd_sm[];
  const int nt = T / BT, BH = Bn * H, rest = blockIdx.x >> 1, bh = rest % BH, rank = rest / BH;
  const bool keys = blockIdx.x & 1;
  const int tile = keys ? rank : nt - 1 - rank, t0 = tile * BT;
  const int b = bh / H, h = bh % H, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int r = lane >> 1, half = lane & 1, row = warp * 16 + r;
  bf16 *qs = reinterpret_cast<bf16 *>(flash_bwd_sm), *dys = qs + BT * LE, *ks = dys + BT * LE, *vs = ks + BT * LE;
  float *ls = reinterpret_cast<float *>(vs + BT * LE), *dd = ls + BT;
  float *s = dd + BT + warp * (16 * SF + 16 * PB);
  bf16 *pw = reinterpret_cast<bf16 *>(s + 16 * SF), *gw = pw + 16 * PB;
  const size_t ldy = (size_t)H * E, ldr = 3 * ldy;
  const bf16 *rows = qkv + (size_t)b * T * ldr + (size_t)h * E;
  const bf16 *dyh = dy + (size_t)b * T * ldy + (size_t)h * E;
  const float *lh = lse + (size_t)bh * T, *dh = dot + (size_t)bh * T;
  // The tiles this block keeps: k and v (∂k, ∂v), or q and dY (∂q).
  if (keys)
    stage2<E>(rows + (size_t)t0 * ldr + ldy, ldr, ks, rows + (size_t)t0 * ldr + 2 * ldy, ldr, vs, cos_t, sin_t, t0);
  else
    stage2<E>(rows + (size_t)t0 * ldr, ldr, qs, dyh + (size_t)t0 * ldy, ldy, dys, cos_t, sin_t, t0);
  C acc[N], acc2[N];
#pragma unroll
  for (int n = 0; n < N; n++) {
    wmma::fill_fragment(acc[n], 0.0f);
    wmma::fill_fragment(acc2[n], 0.0f);
  }
  // The ∂q block's own rows' L and D, in registers.
  // (L in base-2 units, as the exponent's argument is.)
  const float L = keys ? 0.0f : lh[t0 + row] * LOG2E, D = keys ? 0.0f : dh[t0 + row], sl = scale * LOG2E;
  const int first = keys ? tile : 0, last = keys ? nt - 1 : tile;
  for (int u = first; u <= last; u++) {
    const int u0 = u * BT;
    __syncthreads();  // every warp is done with the last tile
    if (keys) {
      stage2<E>(rows + (size_t)u0 * ldr, ldr, qs, dyh + (size_t)u0 * ldy, ldy, dys, cos_t, sin_t, u0);
      if (threadIdx.x < BT)
        ls[threadIdx.x] = lh[u0 + threadIdx.x] * LOG2E;
      else
        dd[threadIdx.x - BT] = dh[u0 + threadIdx.x - BT];
    } else {
      stage2<E>(rows + (size_t)u0 * ldr + ldy, ldr, ks, rows + (size_t)u0 * ldr + 2 * ldy, ldr, vs, cos_t, sin_t, u0);
    }
    __syncthreads();
    // The warp's 16 rows against the tile: ∂k/∂v blocks Sᵀ = k qᵀ and dPᵀ = v dYᵀ (rows are
    // keys, columns queries); the ∂q block S = q kᵀ and dP = dY vᵀ.
    const bool diag = u == tile;
    float pv[32];
    rows_by_tile<E>((keys ? ks : qs) + warp * 16 * LE, keys ? qs : ks, s);
    row_half(s, r, half, pv);
#pragma unroll
    for (int c = 0; c < 32; c++) {
      const int col = half * 32 + c;
      const bool masked = diag && (keys ? row > col : col > row);
      pv[c] = masked ? 0.0f : exp2f(pv[c] * sl - (keys ? ls[col] : L));
    }
    __syncwarp();
    rows_by_tile<E>((keys ? vs : dys) + warp * 16 * LE, keys ? dys : vs, s);
    float g[32];
    row_half(s, r, half, g);
#pragma unroll
    for (int c = 0; c < 32; c++) {
      const int col = half * 32 + c;
      g[c] = scale * pv[c] * (g[c] - (keys ? dd[col] : D));
    }
#pragma unroll
    for (int c = 0; c < 32; c += 8) {
      store16(gw + r * PB + half * 32 + c, g + c);
      if (keys) store16(pw + r * PB + half * 32 + c, pv + c);
    }
    __syncwarp();
    if (keys) {
      strip_by_tile<E>(acc, gw, qs);   // ∂k += dSᵀ q
      strip_by_tile<E>(acc2, pw, dys);  // ∂v += Pᵀ dY
    } else {
      strip_by_tile<E>(acc, gw, ks);  // ∂q += dS k
    }
    __syncwarp();
  }
  bf16 *o = out + ((size_t)b * T + t0 + warp * 16) * ldr + (size_t)h * E;
  if (keys) {
    put<E>(acc, s, o + ldy, ldr, cos_t, sin_t, t0 + warp * 16, true);
    put<E>(acc2, s, o + 2 * ldy, ldr, cos_t, sin_t, 0, false);
  } else {
    put<E>(acc, s, o, ldr, cos_t, sin_t, t0 + warp * 16, true);
  }
}

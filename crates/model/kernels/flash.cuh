// Causal attention for sequences longer than attn.cuh's 128 tokens, tiled as FlashAttention-2
// does: no T × T matrix is written. T is a multiple of 64, E (the head width) of 16, at most
// 128. Tiles of 64 queries or keys, four warps of 16 rows each (of each query tile, where a
// block takes two); the products are mma.sync tiles (mma.cuh) whose scores stay in
// registers: S's accumulators become P's A operand for P v, dS's for dS k or dSᵀ q. q and k
// come roped, with v, as heads (3, b, h, T, E) (qkv_rope_split, run before the forward; the
// backward reads the same heads), so that every tile is 64 contiguous rows that cp.async
// copies without a register: each block loads the next tile while it computes on this one
// (two stages). Before session 50 the tiles were roped as staged, through registers, and
// each waited a full memory latency between two barriers: at E = 128 the forward took 2.4
// times PyTorch's flash kernel (calls 274, 275). Exponentials are one ex2.approx.ftz each.
//
// Forward: a block per (batch, head, query tiles), the heaviest (last queries) first within
// groups of heads (flash::order). It walks the key tiles up to the diagonal with the online
// softmax (running max m and sum l of each row, the output accumulated in registers and
// rescaled row by row) and writes Y and each row's log-sum-exp in base 2 of the scaled
// scores, L = m + log2 l (f32, (b, h, T)): all the backward keeps.
// Backward: two launches (flash_bwd_kv, flash_bwd_q below), five tile products a pair of
// tiles as FlashAttention-2's, but no atomics: a replayed step repeats its bits. Until
// session 50 two kinds of block in one launch each made S and dP (seven products); one kind
// adding ∂q in a fixed order through flags was 3 % slower (calls 272, 273).
// The first version (session 48) made its products with wmma, whose accumulator layout is
// unspecified: every score went through shared memory as f32 and back as bf16 (calls 264,
// 267). Part of fused.cu (see its header for the kernels' arguments).
#pragma once
#include "stage.cuh"

namespace flash {
// Exponentials are taken base 2 (one ex2 instruction; expf's range reduction took more):
// exp(x) = 2^(x · log2 e).
constexpr float LOG2E = 1.4426950408889634f;

// 2^x by the one ex2.approx.ftz instruction. exp2f without fast math also scales inputs
// below -126 and squares the result back (four instructions, two of them predicated) to
// keep subnormal results, which a probability under 2^-126 does not need: 0 is as good.
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// One key tile (from key key0) into the online softmax of MT query tiles of the warp (16
// rows each, tile i's at qa + i·xs bytes, its first row row0 + 64 i): S = q kᵀ, masked where
// the key is after the query (`diag`), the running max and sum, O = corr · O + P v.
template <int E, int MT>
__device__ __forceinline__ void fwd_tile(float (&o)[MT][E / 8][4], float (&m)[MT][2], float (&l)[MT][2],
                                         uint32_t qa, uint32_t xs, uint32_t kb, uint32_t vt, int key0,
                                         int row0, bool diag, float sl) {
  constexpr int KB = E / 16, NE = E / 8, LE = E + 8;
  const int t = threadIdx.x & 3;
  float s[MT][8][4];
#pragma unroll
  for (int i = 0; i < MT; i++) mma::zero(s[i]);
  mma::rows_yt<MT, KB, 8, LE>(s, qa, xs, kb);
  // Masked above the diagonal; x = scale · log2 e · S is taken in the exponent's FFMA (the
  // scale is positive, so S's row max scaled is x's).
  if (diag)
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
      for (int n = 0; n < 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
          if (key0 + n * 8 + 2 * t + (e & 1) > row0 + i * BT + (e >> 1) * 8) s[i][n][e] = -INFINITY;
  uint32_t pa[MT][4][4];
#pragma unroll
  for (int i = 0; i < MT; i++) {
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) mx[e >> 1] = fmaxf(mx[e >> 1], s[i][n][e]);
    float corr[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
      mx[hh] = fmaxf(mx[hh], __shfl_xor_sync(0xffffffff, mx[hh], 1));
      mx[hh] = fmaxf(mx[hh], __shfl_xor_sync(0xffffffff, mx[hh], 2));
      const float mn = fmaxf(m[i][hh], mx[hh] * sl);
      corr[hh] = ex2(m[i][hh] - mn);
      m[i][hh] = mn;
    }
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        s[i][n][e] = ex2(fmaf(s[i][n][e], sl, -m[i][e >> 1]));
        sum[e >> 1] += s[i][n][e];
      }
#pragma unroll
    for (int hh = 0; hh < 2; hh++) l[i][hh] = l[i][hh] * corr[hh] + sum[hh];
#pragma unroll
    for (int n = 0; n < NE; n++) {
      o[i][n][0] *= corr[0];
      o[i][n][1] *= corr[0];
      o[i][n][2] *= corr[1];
      o[i][n][3] *= corr[1];
    }
    mma::to_a<8>(pa[i], s[i]);
  }
  mma::regs_y<MT, 4, NE, LE>(o, pa, vt);
}
}  // namespace flash

// Forward. heads: q, k (roped) and v as (3, b, h, T, E); y: (b, T, h, E); lse: (b, h, T).
// A block of four warps per (batch, head, MT query tiles), in flash::order (the last queries
// first); warp w holds rows 16 w + 64 i of the block's 64·MT, so that each fragment of k and
// v read from shared memory feeds MT products (MT = 2 as FlashAttention-2's 128 queries a
// block; MT = 1 where T / 64 is odd). Of the last key tile only the last query tile's rows
// see a key. Shared memory: the q tiles and two stages of k and v tiles (64 rows of E + 8);
// a warp's q rows stage its output at the end. A lane holds rows g and g + 8 of its warp's
// 16 in each query tile (mma.cuh), each row's running max and sum in base-2 units, the sum
// over the lane's columns only until the end.
template <int E, int MT>
__device__ void flash_fwd(const bf16 *heads, bf16 *y, float *lse, int Bn, int H, int T, float scale) {
  using namespace flash;
  static_assert(MT == 1 || MT == 2, "one or two query tiles a block");
  constexpr int NE = E / 8, LE = E + 8, TB = BT * LE * 2;  // TB: a tile's bytes (q, k or v)
  extern __shared__ float flash_fwd_sm[];
  const int nq = T / (BT * MT);
  int bh, rank;
  order(Bn * H, nq, bh, rank);
  const int qt = nq - 1 - rank, b = bh / H, h = bh % H, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3, r0 = warp * 16 + g, i0 = qt * BT * MT;
  bf16 *qs = reinterpret_cast<bf16 *>(flash_fwd_sm), *kv = qs + MT * BT * LE;  // stage s: k, v at 2s, 2s + 1
  bf16 *qw = qs + warp * 16 * LE;
  const uint32_t qa = mma::smem(qw) + 2 * mma::a_lane<LE>(), kb = mma::smem(kv) + 2 * mma::b_lane<LE>();
  const uint32_t vt = mma::smem(kv) + TB + 2 * mma::t_lane<LE>();
  const size_t plane = (size_t)Bn * H * T * E, ldy = (size_t)H * E;
  const bf16 *qh = heads + (size_t)bh * T * E, *kh = qh + plane, *vh = kh + plane;
#pragma unroll
  for (int i = 0; i < MT; i++) tile<E>(qh + (size_t)(i0 + i * BT) * E, E, qs + i * BT * LE);
  tile<E>(kh, E, kv);
  tile<E>(vh, E, kv + BT * LE);
  commit();
  float o[MT][NE][4], m[MT][2], l[MT][2];
#pragma unroll
  for (int i = 0; i < MT; i++) {
    mma::zero(o[i]);
    m[i][0] = m[i][1] = -INFINITY;
    l[i][0] = l[i][1] = 0.0f;
  }
  const float sl = scale * LOG2E;
  const int first = qt * MT, last = first + MT - 1;  // key tiles from `first` on reach the diagonal
  for (int j = 0; j <= last; j++) {
    const uint32_t st = (j & 1) * 2 * TB;  // this tile's stage
    advance(j < last, [&] {
      bf16 *nx = kv + ((j + 1) & 1) * 2 * BT * LE;
      tile<E>(kh + (size_t)(j + 1) * BT * E, E, nx);
      tile<E>(vh + (size_t)(j + 1) * BT * E, E, nx + BT * LE);
    });
    if (MT == 1 || j < last) {
      fwd_tile<E, MT>(o, m, l, qa, TB, kb + st, vt + st, j * BT, i0 + r0, j >= first, sl);
    } else {  // the last key tile is after every row of the query tiles but the last
      constexpr int L = MT - 1;
      fwd_tile<E, 1>(reinterpret_cast<float (&)[1][NE][4]>(o[L]), reinterpret_cast<float (&)[1][2]>(m[L]),
                     reinterpret_cast<float (&)[1][2]>(l[L]), qa + L * TB, 0, kb + st, vt + st, j * BT,
                     i0 + L * BT + r0, true, sl);
    }
    __syncthreads();  // every warp is done with this stage before it is loaded again
  }
#pragma unroll
  for (int i = 0; i < MT; i++) {
#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
      l[i][hh] += __shfl_xor_sync(0xffffffff, l[i][hh], 1);
      l[i][hh] += __shfl_xor_sync(0xffffffff, l[i][hh], 2);
    }
#pragma unroll
    for (int n = 0; n < NE; n++) {
      o[i][n][0] /= l[i][0];
      o[i][n][1] /= l[i][0];
      o[i][n][2] /= l[i][1];
      o[i][n][3] /= l[i][1];
    }
    // Only this warp reads its q rows: they stage its output.
    __syncwarp();
    bf16 *w = qw + i * BT * LE;
    const int row = i0 + i * BT + warp * 16;
    mma::put_rows<NE>(o[i], w, LE, nullptr, nullptr, 0, false);
    mma::copy_rows<E>(w, LE, y + ((size_t)b * T + row) * ldy + (size_t)h * E, ldy);
    if (t == 0)
#pragma unroll
      for (int hh = 0; hh < 2; hh++) lse[(size_t)bh * T + i0 + i * BT + r0 + hh * 8] = m[i][hh] + log2f(l[i][hh]);
  }
}

// The lanes flash_dot gives a (b, t, h) row: its E / 8 16-byte chunks, rounded up to a power
// of two (kernels::attn's launcher counts the same).
__host__ __device__ constexpr int dot_lanes(int E) { return E <= 16 ? 2 : E <= 32 ? 4 : E <= 64 ? 8 : 16; }

// D = dY · Y of every row and head (b, h, T), f32: the backward's blocks read it as they
// read L. dot_lanes(E) lanes a row, a 16-byte chunk of dY and Y each, so that a warp's loads
// are contiguous, their products added across the lanes. Until session 58 a thread took a
// row, its eight loads a tensor 128 bytes apart across the warp: 5.6 µs for 6.6 MB at xl's
// 8 × 128 tokens (call 327).
template <int E>
__device__ void flash_dot(const bf16 *y, const bf16 *dy, float *out, int Bn, int H, int T) {
  const size_t g = blockIdx.x * (size_t)blockDim.x + threadIdx.x, i = g / dot_lanes(E),
               rows = (size_t)Bn * T * H;
  const int j = threadIdx.x % dot_lanes(E);
  float d = 0.0f;
  if (i < rows && j < E / 8) {
    float a[8], o[8];
    load16(dy + i * E + j * 8, a);
    load16(y + i * E + j * 8, o);
#pragma unroll
    for (int k = 0; k < 8; k++) d += a[k] * o[k];
  }
#pragma unroll
  for (int m = dot_lanes(E) / 2; m > 0; m >>= 1) d += __shfl_xor_sync(0xffffffff, d, m);
  if (i >= rows || j != 0) return;
  const int n[2] = {H, T};
  int at[3];
  unflatten(i, rows, n, at);  // i = (b · T + t) · H + h
  out[((size_t)at[2] * H + at[0]) * T + at[1]] = d;
}

// Backward, in two launches. Each makes P = 2^(scale · log2 e · q kᵀ − L) and dP = dY vᵀ
// once: dS = scale · P ⊙ (dP − D) with D = dY · Y per row (flash_dot, launched first).
// flash_bwd_kv: a block per key tile (in flash::order) walks the query tiles at and after
// it, makes ∂k += dSᵀ q and ∂v += Pᵀ dY in registers, and writes each pair's dSᵀ (bf16,
// 64 keys × 64 queries) to ds: four products a pair. flash_bwd_q: a block per query tile
// makes ∂q = Σ dS k over the key tiles up to it from those dSᵀ: one product a pair. Five in
// all, as FlashAttention-2's atomic ∂q, and still no atomics: every output is written
// once, in a fixed order, so a replayed step repeats its bits.
// ds: per (b, h) the pairs u ≥ j (query tile u, key tile j) at u (u + 1) / 2 + j, each
// 64 × 64. out: ∂qkv in the qkv rows' layout (b, T, 3, h, E), ∂q and ∂k turned back by
// RoPE's angle: ∂k and ∂v by flash_bwd_kv, ∂q by flash_bwd_q.

// ∂k and ∂v. heads (3, b, h, T, E) as the forward's; the tables (to turn ∂k back), L and D
// (b, h, T), dY (b, T, h, E). Shared memory: k and v (the block's own, 64 rows of E + 8),
// two stages of q and dY with their rows' L and D, and dSᵀ (64 × 72 bf16) on its way out.
// A warp's 16 key rows of k and v are read by it alone (the A operands), and stage its
// output, as do its rows of dSᵀ.
template <int E>
__device__ void flash_bwd_kv(const bf16 *heads, const float *cos_t, const float *sin_t, const float *lse,
                             const float *dot, const bf16 *dy, bf16 *ds, bf16 *out, int Bn, int H, int T,
                             float scale) {
  using namespace flash;
  constexpr int KB = E / 16, NE = E / 8, LE = E + 8, TB = BT * LE * 2, LS = BT + 8;
  extern __shared__ float flash_bwd_sm[];
  const int nt = T / BT, BH = Bn * H;
  int bh, j;
  order(BH, nt, bh, j);
  const int t0 = j * BT, b = bh / H, h = bh % H, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3, r0 = warp * 16 + g;
  // Tiles: k, v, then stage s's q and dY at 2 + 2s, 3 + 2s; then L and D of two stages; dSᵀ.
  bf16 *own = reinterpret_cast<bf16 *>(flash_bwd_sm), *walk = own + 2 * BT * LE;
  float *ld0 = reinterpret_cast<float *>(walk + 4 * BT * LE);  // stage s: L at 2s · 64, D after
  bf16 *dss = reinterpret_cast<bf16 *>(ld0 + 4 * BT) + warp * 16 * LS;  // the warp's rows
  const int wr = warp * 16 * LE;  // the warp's rows in a tile
  const uint32_t ra = mma::smem(own) + 2 * (wr + mma::a_lane<LE>()), rb = mma::smem(walk) + 2 * mma::b_lane<LE>();
  const uint32_t rt = mma::smem(walk) + 2 * mma::t_lane<LE>();
  const size_t plane = (size_t)Bn * H * T * E, ldy = (size_t)H * E, ldr = 3 * ldy;
  const bf16 *qh = heads + (size_t)bh * T * E, *kh = qh + plane, *vh = kh + plane;
  const bf16 *dyh = dy + (size_t)b * T * ldy + (size_t)h * E;
  const float *lh = lse + (size_t)bh * T, *dh = dot + (size_t)bh * T;
  bf16 *dsh = ds + (size_t)bh * (nt * (nt + 1) / 2) * BT * BT + warp * 16 * BT;
  auto load = [&](int u, int s) {
    bf16 *w = walk + s * 2 * BT * LE;
    const int u0 = u * BT;
    tile<E>(qh + (size_t)u0 * E, E, w);
    tile<E>(dyh + (size_t)u0 * ldy, ldy, w + BT * LE);
    rows64(lh + u0, ld0 + s * 2 * BT, dh + u0, ld0 + s * 2 * BT + BT);
  };
  tile<E>(kh + (size_t)t0 * E, E, own);
  tile<E>(vh + (size_t)t0 * E, E, own + BT * LE);
  load(j, 0);
  commit();
  float acc[NE][4], acc2[NE][4];
  mma::zero(acc);
  mma::zero(acc2);
  const float sl = scale * LOG2E;
  for (int u = j; u < nt; u++) {
    const int s = (u - j) & 1;
    advance(u + 1 < nt, [&] { load(u + 1, s ^ 1); });
    const uint32_t st = s * 2 * TB;
    const float *ls = ld0 + s * 2 * BT, *dd = ls + BT;
    // The warp's 16 keys against the tile's queries: Sᵀ = k qᵀ and dPᵀ = v dYᵀ.
    float sc[8][4], dp[8][4];
    mma::zero(sc);
    mma::zero(dp);
    mma::rows_yt<KB, 8, LE>(sc, ra, rb + st);
    mma::rows_yt<KB, 8, LE>(dp, ra + TB, rb + st + TB);
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) sc[n][e] = ex2(fmaf(sc[n][e], sl, -ls[n * 8 + 2 * t + (e & 1)]));
    if (u == j)  // the diagonal tile: P = 0 where the key is after the query
#pragma unroll
      for (int n = 0; n < 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
          if (r0 + (e >> 1) * 8 > n * 8 + 2 * t + (e & 1)) sc[n][e] = 0.0f;
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) dp[n][e] = scale * sc[n][e] * (dp[n][e] - dd[n * 8 + 2 * t + (e & 1)]);
    uint32_t pa[4][4], ga[4][4];
    mma::to_a<8>(ga, dp);
    mma::to_a<8>(pa, sc);
    mma::regs_y<4, NE, LE>(acc, ga, rt + st);        // ∂k += dSᵀ q
    mma::regs_y<4, NE, LE>(acc2, pa, rt + st + TB);  // ∂v += Pᵀ dY
    // dSᵀ out, the warp's 16 key rows: through shared memory, 16 bytes a store.
    mma::put_a<4>(ga, dss, LS);
    mma::copy_rows<BT>(dss, LS, dsh + (size_t)(u * (u + 1) / 2 + j) * BT * BT, BT);
    __syncthreads();  // every warp is done with this stage before it is loaded again
  }
  bf16 *o = out + ((size_t)b * T + t0 + warp * 16) * ldr + (size_t)h * E;
  mma::put_rows<NE>(acc, own + wr, LE, cos_t, sin_t, t0 + warp * 16, true);
  mma::put_rows<NE>(acc2, own + BT * LE + wr, LE, cos_t, sin_t, 0, false);
  mma::copy_rows<E>(own + wr, LE, o + ldy, ldr);
  mma::copy_rows<E>(own + BT * LE + wr, LE, o + 2 * ldy, ldr);
}

// ∂q from flash_bwd_kv's dSᵀ and k: a block per MT query tiles (as the forward's: warp w
// makes rows 16 w + 64 i, i < MT), in flash::order. Shared memory: q_stages stages of MT
// dSᵀ tiles (64 × 72) and a k tile (64 rows of E + 8); each fragment of k read feeds MT
// products. A warp reads its query rows' dSᵀ transposed. Of the last key tile only the
// last query tile has a pair.
template <int E, int MT>
__device__ void flash_bwd_q(const bf16 *heads, const float *cos_t, const float *sin_t, const bf16 *ds, bf16 *out,
                            int Bn, int H, int T) {
  using namespace flash;
  static_assert(MT == 1 || MT == 2, "one or two query tiles a block");
  constexpr int NE = E / 8, LE = E + 8, LS = BT + 8, XS = BT * LS * 2;  // XS: a dSᵀ tile's bytes
  constexpr int SB = MT * XS + BT * LE * 2, ST = q_stages<E, MT>();     // a stage's bytes, stages
  extern __shared__ float flash_bwd_sm[];
  const int nt = T / BT, BH = Bn * H, warp = threadIdx.x >> 5;
  int bh, rank;
  order(BH, nt / MT, bh, rank);
  const int u0 = (nt / MT - 1 - rank) * MT, last = u0 + MT - 1;  // the first query tile, the last key tile
  const int b = bh / H, h = bh % H;
  bf16 *sm = reinterpret_cast<bf16 *>(flash_bwd_sm);  // stage s: MT dSᵀ tiles, then k
  const uint32_t xa = mma::smem(sm) + 2 * (mma::b_lane<LS>() + warp * 16);
  const uint32_t kt = mma::smem(sm) + MT * XS + 2 * mma::t_lane<LE>();
  const size_t plane = (size_t)Bn * H * T * E, ldr = 3 * (size_t)H * E;
  const bf16 *kh = heads + plane + (size_t)bh * T * E;
  const bf16 *dsb = ds + (size_t)bh * (nt * (nt + 1) / 2) * BT * BT;
  auto load = [&](int jj, int s) {
    bf16 *w = sm + s * (SB / 2);
#pragma unroll
    for (int i = 0; i < MT; i++) {
      const int u = u0 + i;
      if (jj <= u) tile<BT>(dsb + (size_t)(u * (u + 1) / 2 + jj) * BT * BT, BT, w + i * (XS / 2));
    }
    tile<E>(kh + (size_t)jj * BT * E, E, w + MT * (XS / 2));
  };
  load(0, 0);
  commit();
  if (ST == 3) {
    if (last >= 1) load(1, 1);
    commit();
  }
  float acc[MT][NE][4];
#pragma unroll
  for (int i = 0; i < MT; i++) mma::zero(acc[i]);
  for (int jj = 0; jj <= last; jj++) {
    const int s = jj % ST;
    advance<ST>(jj + ST - 1 <= last, [&] { load(jj + ST - 1, (jj + ST - 1) % ST); });
    if (MT == 1 || jj < last) {
      mma::cols_y<MT, BT / 16, NE, LS, LE>(acc, xa + s * SB, XS, kt + s * SB);  // ∂q += dS k
    } else {  // the last key tile pairs with the last query tile alone
      constexpr int L = MT - 1;
      mma::cols_y<1, BT / 16, NE, LS, LE>(reinterpret_cast<float (&)[1][NE][4]>(acc[L]), xa + s * SB + L * XS, 0,
                                          kt + s * SB);
    }
    __syncthreads();
  }
  // The warp's rows of stage i's k tile stage query tile i's output.
#pragma unroll
  for (int i = 0; i < MT; i++) {
    bf16 *w = sm + i * (SB / 2) + MT * (XS / 2) + warp * 16 * LE;
    const int row = (u0 + i) * BT + warp * 16;
    mma::put_rows<NE>(acc[i], w, LE, cos_t, sin_t, row, true);
    mma::copy_rows<E>(w, LE, out + ((size_t)b * T + row) * ldr + (size_t)h * E, ldr);
  }
}

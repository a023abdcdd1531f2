// Causal attention for sequences longer than attn.cuh's 128 tokens, tiled as FlashAttention-2
// does: no T × T matrix is written. T is a multiple of 64, E (the head width) of 16, at most
// 128. Tiles of 64 queries or keys, four warps of 16 rows each; the products are mma.sync
// tiles (mma.cuh) whose scores stay in registers: S's accumulators become P's A operand
// for P v, dS's for dS k or dSᵀ q. q and k come roped, with v, as heads (3, b, h, T, E)
// (qkv_rope_split, run before each direction), so that every tile is 64 contiguous rows that
// cp.async copies without a register: each block loads the next tile while it computes on
// this one (two stages). Before session 50 the tiles were roped as staged, through registers,
// and each waited a full memory latency between two barriers: at E = 128 the forward took
// 2.4 times PyTorch's flash kernel (call 274).
//
// Forward: a block per (batch, head, query tile), the heaviest tiles (last queries) first. It
// walks the key tiles up to the diagonal with the online softmax (running max m and sum l of
// each row, the output accumulated in registers and rescaled row by row) and writes Y and
// each row's log-sum-exp in base 2 of the scaled scores, L = m + log2 l (f32, (b, h, T)):
// all the backward keeps.
// Backward: two kinds of block in one launch, both deterministic (no atomics, so a replayed
// step repeats its bits): a key tile's ∂k and ∂v over the query tiles at and after it, and a
// query tile's ∂q over the key tiles up to it. Each makes P = 2^(scale · log2 e · q kᵀ − L)
// and dP = dY vᵀ again; dS = scale · P ⊙ (dP − D) with D = dY · Y per row (flash_dot,
// launched first). The two kinds make S and dP twice: seven tile products a pair of tiles
// where FlashAttention's atomic ∂q takes five. One kind of block with ∂q summed over the key
// tiles in a fixed order through flags (five products) was tried in session 50 and was 3 %
// slower: each ordered sum's round trips (flag, sums, fence) stood in the block's path
// (calls 272, 273).
// The first version (session 48) made its products with wmma, whose accumulator layout is
// unspecified: every score went through shared memory as f32 and back as bf16 (calls 264,
// 267). Part of fused.cu (see its header for the kernels' arguments).
#pragma once
#include "mma.cuh"

namespace flash {
constexpr int BT = 64;  // rows of a query or key tile
// Exponentials are taken base 2 (one ex2 instruction; expf's range reduction took more):
// exp(x) = 2^(x · log2 e).
constexpr float LOG2E = 1.4426950408889634f;

// A 64-row tile of E bf16 (rows ld apart) into shared rows of E + 8, by the block's 128
// threads, 16 bytes a cp.async: issued, not waited (commit and wait are the caller's).
template <int E> __device__ __forceinline__ void tile(const bf16 *src, size_t ld, bf16 *dst) {
  constexpr int PER = BT * (E / 8) / 128, LE = E + 8;
#pragma unroll
  for (int i = 0; i < PER; i++) {
    const int c = threadIdx.x + i * 128, r = c / (E / 8), col = (c % (E / 8)) * 8;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(mma::smem(dst + r * LE + col)),
                 "l"(src + r * ld + col));
  }
}
// 64 f32 of each of a and b into shared as and bs, as tile does (threads 0-31).
__device__ __forceinline__ void rows64(const float *a, float *as, const float *b, float *bs) {
  if (threadIdx.x < 32) {
    const int i = (threadIdx.x & 15) * 4;
    const float *s = threadIdx.x < 16 ? a : b;
    float *d = threadIdx.x < 16 ? as : bs;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(mma::smem(d + i)), "l"(s + i));
  }
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N committed groups of this thread are still in flight.
template <int N> __device__ __forceinline__ void wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
}  // namespace flash

// Forward. heads: q, k (roped) and v as (3, b, h, T, E); y: (b, T, h, E); lse: (b, h, T).
// Shared memory: the q tile and two stages of k and v tiles (64 rows of E + 8); a warp's q
// rows stage its output at the end. A lane holds rows g and g + 8 of its warp's 16
// (mma.cuh), each row's running max and sum in base-2 units, the sum over the lane's
// columns only until the end.
template <int E>
__device__ void flash_fwd(const bf16 *heads, bf16 *y, float *lse, int Bn, int H, int T, float scale) {
  using namespace flash;
  constexpr int KB = E / 16, NE = E / 8, LE = E + 8, TB = BT * LE * 2;  // TB: a tile's bytes
  extern __shared__ float flash_fwd_sm[];
  const int nt = T / BT, bh = blockIdx.x % (Bn * H), qt = nt - 1 - blockIdx.x / (Bn * H);
  const int b = bh / H, h = bh % H, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3, r0 = warp * 16 + g, i0 = qt * BT;
  bf16 *qs = reinterpret_cast<bf16 *>(flash_fwd_sm), *kv = qs + BT * LE;  // stage s: k, v at 2s, 2s + 1
  bf16 *qw = qs + warp * 16 * LE;
  const uint32_t qa = mma::smem(qw) + 2 * mma::a_lane<LE>(), kb = mma::smem(kv) + 2 * mma::b_lane<LE>();
  const uint32_t vt = mma::smem(kv) + TB + 2 * mma::t_lane<LE>();
  const size_t plane = (size_t)Bn * H * T * E, ldy = (size_t)H * E;
  const bf16 *qh = heads + (size_t)bh * T * E, *kh = qh + plane, *vh = kh + plane;
  tile<E>(qh + (size_t)i0 * E, E, qs);
  tile<E>(kh, E, kv);
  tile<E>(vh, E, kv + BT * LE);
  commit();
  float o[NE][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  mma::zero(o);
  const float sl = scale * LOG2E;
  for (int j = 0; j <= qt; j++) {
    const uint32_t st = (j & 1) * 2 * TB;  // this tile's stage
    if (j < qt) {  // the next tile into the other stage, freed by the last iteration's barrier
      bf16 *nx = kv + ((j + 1) & 1) * 2 * BT * LE;
      tile<E>(kh + (size_t)(j + 1) * BT * E, E, nx);
      tile<E>(vh + (size_t)(j + 1) * BT * E, E, nx + BT * LE);
      commit();
      wait<1>();
    } else {
      wait<0>();
    }
    __syncthreads();  // this tile is in every thread's view
    float s[8][4];
    mma::zero(s);
    mma::rows_yt<KB, 8, LE>(s, qa, kb + st);
    // The online softmax over this tile: x = scale · log2 e · S, masked above the diagonal.
    if (j == qt)
#pragma unroll
      for (int n = 0; n < 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
          if (n * 8 + 2 * t + (e & 1) > r0 + (e >> 1) * 8) s[n][e] = -INFINITY;
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        s[n][e] *= sl;
        mx[e >> 1] = fmaxf(mx[e >> 1], s[n][e]);
      }
    float corr[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
      mx[hh] = fmaxf(mx[hh], __shfl_xor_sync(0xffffffff, mx[hh], 1));
      mx[hh] = fmaxf(mx[hh], __shfl_xor_sync(0xffffffff, mx[hh], 2));
      const float mn = fmaxf(m[hh], mx[hh]);
      corr[hh] = exp2f(m[hh] - mn);
      m[hh] = mn;
    }
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        s[n][e] = exp2f(s[n][e] - m[e >> 1]);
        sum[e >> 1] += s[n][e];
      }
#pragma unroll
    for (int hh = 0; hh < 2; hh++) l[hh] = l[hh] * corr[hh] + sum[hh];
    // O = corr · O + P v over the tile's keys.
#pragma unroll
    for (int n = 0; n < NE; n++) {
      o[n][0] *= corr[0];
      o[n][1] *= corr[0];
      o[n][2] *= corr[1];
      o[n][3] *= corr[1];
    }
    uint32_t pa[4][4];
    mma::to_a<8>(pa, s);
    mma::regs_y<4, NE, LE>(o, pa, vt + st);
    __syncthreads();  // every warp is done with this stage before it is loaded again
  }
#pragma unroll
  for (int hh = 0; hh < 2; hh++) {
    l[hh] += __shfl_xor_sync(0xffffffff, l[hh], 1);
    l[hh] += __shfl_xor_sync(0xffffffff, l[hh], 2);
  }
#pragma unroll
  for (int n = 0; n < NE; n++) {
    o[n][0] /= l[0];
    o[n][1] /= l[0];
    o[n][2] /= l[1];
    o[n][3] /= l[1];
  }
  // Only this warp reads its q rows: they stage its output.
  __syncwarp();
  mma::put_rows<NE>(o, qw, LE, nullptr, nullptr, 0, false);
  mma::copy_rows<E>(qw, LE, y + ((size_t)b * T + i0 + warp * 16) * ldy + (size_t)h * E, ldy);
  if (t == 0)
#pragma unroll
    for (int hh = 0; hh < 2; hh++) lse[(size_t)bh * T + i0 + r0 + hh * 8] = m[hh] + log2f(l[hh]);
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

// Backward. heads (3, b, h, T, E) as the forward's; the tables (to turn ∂q and ∂k back), L
// and D (b, h, T), dY (b, T, h, E); out: ∂qkv in the qkv rows' layout (b, T, 3, h, E), ∂q
// and ∂k turned back by RoPE's angle. Block 2i + 1 makes ∂k, ∂v of a key tile, block 2i the
// ∂q of a query tile; the heaviest tiles first. Shared memory: the block's own two tiles (k
// and v, or q and dY), two stages of the two tiles it walks (q and dY with their rows' L and
// D, or k and v), 64 rows of E + 8 each, and the L and D (f32) of two stages. A warp's 16
// rows of the own tiles are read by it alone (the A operands), and stage its output.
// The two kinds are one body, compiled apart (`keys`), so that neither carries the other's
// selects and registers.
template <int E, bool keys>
__device__ __forceinline__ void flash_bwd_block(const bf16 *heads, const float *cos_t, const float *sin_t,
                                                const float *lse, const float *dot, const bf16 *dy, bf16 *out,
                                                int Bn, int H, int T, float scale) {
  using namespace flash;
  constexpr int KB = E / 16, NE = E / 8, LE = E + 8, TB = BT * LE * 2;
  extern __shared__ float flash_bwd_sm[];
  const int nt = T / BT, BH = Bn * H, rest = blockIdx.x >> 1, bh = rest % BH, rank = rest / BH;
  const int tile0 = keys ? rank : nt - 1 - rank, t0 = tile0 * BT;
  const int b = bh / H, h = bh % H, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3, r0 = warp * 16 + g;
  // Tiles: own 0, own 1, then stage s's a and b at 2 + 2s, 3 + 2s; then L and D of stage s.
  bf16 *own = reinterpret_cast<bf16 *>(flash_bwd_sm), *walk = own + 2 * BT * LE;
  float *ld0 = reinterpret_cast<float *>(walk + 4 * BT * LE);  // stage s: L at 2s · 64, D after
  const int wr = warp * 16 * LE;  // the warp's rows in a tile
  // Shared addresses for the products: the own tiles' warp rows as A operands, the walked
  // tiles' rows as B operands, transposed (mma.cuh).
  const uint32_t ra = mma::smem(own) + 2 * (wr + mma::a_lane<LE>()), rb = mma::smem(walk) + 2 * mma::b_lane<LE>();
  const uint32_t rt = mma::smem(walk) + 2 * mma::t_lane<LE>();
  const size_t plane = (size_t)Bn * H * T * E, ldy = (size_t)H * E, ldr = 3 * ldy;
  const bf16 *qh = heads + (size_t)bh * T * E, *kh = qh + plane, *vh = kh + plane;
  const bf16 *dyh = dy + (size_t)b * T * ldy + (size_t)h * E;
  const float *lh = lse + (size_t)bh * T, *dh = dot + (size_t)bh * T;
  // The walked tiles of tile u into stage s: q, dY, L, D (∂k, ∂v), or k, v (∂q).
  auto load = [&](int u, int s) {
    bf16 *w = walk + s * 2 * BT * LE;
    const int u0 = u * BT;
    if (keys) {
      tile<E>(qh + (size_t)u0 * E, E, w);
      tile<E>(dyh + (size_t)u0 * ldy, ldy, w + BT * LE);
      rows64(lh + u0, ld0 + s * 2 * BT, dh + u0, ld0 + s * 2 * BT + BT);
    } else {
      tile<E>(kh + (size_t)u0 * E, E, w);
      tile<E>(vh + (size_t)u0 * E, E, w + BT * LE);
    }
  };
  // The tiles this block keeps: k and v (∂k, ∂v), or q and dY (∂q).
  if (keys) {
    tile<E>(kh + (size_t)t0 * E, E, own);
    tile<E>(vh + (size_t)t0 * E, E, own + BT * LE);
  } else {
    tile<E>(qh + (size_t)t0 * E, E, own);
    tile<E>(dyh + (size_t)t0 * ldy, ldy, own + BT * LE);
  }
  const int first = keys ? tile0 : 0, last = keys ? nt - 1 : tile0;
  load(first, 0);
  commit();
  float acc[NE][4], acc2[NE][4];
  mma::zero(acc);
  mma::zero(acc2);
  // The ∂q block's own rows' L and D.
  float L[2] = {0.0f, 0.0f}, D[2] = {0.0f, 0.0f};
  if (!keys)
#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
      L[hh] = lh[t0 + r0 + hh * 8];
      D[hh] = dh[t0 + r0 + hh * 8];
    }
  const float sl = scale * LOG2E;
  for (int u = first; u <= last; u++) {
    const int s = (u - first) & 1;
    if (u < last) {  // the next tile into the other stage, freed by the last iteration's barrier
      load(u + 1, s ^ 1);
      commit();
      wait<1>();
    } else {
      wait<0>();
    }
    __syncthreads();  // this tile is in every thread's view
    const uint32_t st = s * 2 * TB;
    const float *ls = ld0 + s * 2 * BT, *dd = ls + BT;
    // The warp's 16 rows against the tile: ∂k/∂v blocks Sᵀ = k qᵀ and dPᵀ = v dYᵀ (rows are
    // keys, columns queries); the ∂q block S = q kᵀ and dP = dY vᵀ.
    float sc[8][4], dp[8][4];
    mma::zero(sc);
    mma::zero(dp);
    mma::rows_yt<KB, 8, LE>(sc, ra, rb + st);
    mma::rows_yt<KB, 8, LE>(dp, ra + TB, rb + st + TB);
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int col = n * 8 + 2 * t + (e & 1);
        sc[n][e] = exp2f(sc[n][e] * sl - (keys ? ls[col] : L[e >> 1]));
      }
    if (u == tile0)  // the diagonal tile: P = 0 above it
#pragma unroll
      for (int n = 0; n < 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int col = n * 8 + 2 * t + (e & 1), row = r0 + (e >> 1) * 8;
          if (keys ? row > col : col > row) sc[n][e] = 0.0f;
        }
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int col = n * 8 + 2 * t + (e & 1);
        dp[n][e] = scale * sc[n][e] * (dp[n][e] - (keys ? dd[col] : D[e >> 1]));
      }
    uint32_t pa[4][4], ga[4][4];
    mma::to_a<8>(ga, dp);
    if constexpr (keys) {
      mma::to_a<8>(pa, sc);
      mma::regs_y<4, NE, LE>(acc, ga, rt + st);        // ∂k += dSᵀ q
      mma::regs_y<4, NE, LE>(acc2, pa, rt + st + TB);  // ∂v += Pᵀ dY
    } else {
      mma::regs_y<4, NE, LE>(acc, ga, rt + st);  // ∂q += dS k
    }
    __syncthreads();  // every warp is done with this stage before it is loaded again
  }
  bf16 *o = out + ((size_t)b * T + t0 + warp * 16) * ldr + (size_t)h * E;
  if (keys) {
    mma::put_rows<NE>(acc, own + wr, LE, cos_t, sin_t, t0 + warp * 16, true);
    mma::put_rows<NE>(acc2, own + BT * LE + wr, LE, cos_t, sin_t, 0, false);
    mma::copy_rows<E>(own + wr, LE, o + ldy, ldr);
    mma::copy_rows<E>(own + BT * LE + wr, LE, o + 2 * ldy, ldr);
  } else {
    mma::put_rows<NE>(acc, own + wr, LE, cos_t, sin_t, t0 + warp * 16, true);
    mma::copy_rows<E>(own + wr, LE, o, ldr);
  }
}
template <int E>
__device__ void flash_bwd(const bf16 *heads, const float *cos_t, const float *sin_t, const float *lse,
                          const float *dot, const bf16 *dy, bf16 *out, int Bn, int H, int T, float scale) {
  if (blockIdx.x & 1)
    flash_bwd_block<E, true>(heads, cos_t, sin_t, lse, dot, dy, out, Bn, H, T, scale);
  else
    flash_bwd_block<E, false>(heads, cos_t, sin_t, lse, dot, dy, out, Bn, H, T, scale);
}

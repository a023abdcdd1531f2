// Causal attention for sequences longer than attn.cuh's 128 tokens, tiled as FlashAttention-2
// does: no T × T matrix is written. T is a multiple of 64, E (the head width) of 16, at most
// 128. Tiles of 64 queries or keys, four warps of 16 rows each; the products are mma.sync
// tiles (mma.cuh) whose scores stay in registers: S's accumulators become P's A operand
// for P v, dS's for dS k or dSᵀ q. q and k are roped as they are staged, as attn.cuh does.
//
// Forward: a block per (batch, head, query tile), the heaviest tiles (last queries) first. It
// walks the key tiles up to the diagonal with the online softmax (running max m and sum l of
// each row, the output accumulated in registers and rescaled row by row) and writes Y and
// each row's log-sum-exp L = m + ln l (f32, (b, h, T)), all the backward keeps.
// Backward: two kinds of block in one launch, both deterministic (no atomics, so a replayed
// step repeats its bits): a key tile's ∂k and ∂v over the query tiles at and after it, and a
// query tile's ∂q over the key tiles up to it. Each makes P = exp(scale · q kᵀ − L) and
// dP = dY vᵀ again; dS = scale · P ⊙ (dP − D) with D = dY · Y per row (flash_dot, launched
// first). The two kinds make S and dP twice (seven tile products per pair of tiles where
// FlashAttention's atomic ∂q takes five). Each tile pair's loads are all issued before their
// stores (stage2): per-chunk waits had made the first version 13 % slower (calls 261-263).
// The first version (session 48) made its products with wmma, whose accumulator layout is
// unspecified: every score went through shared memory as f32 and back as bf16, and xl's
// step at 8 × 1024 tokens took 260 ms against this one's 221 (calls 264, 267).
// Part of fused.cu (see its header for the kernels' arguments).
#pragma once
#include "attn.cuh"
#include "mma.cuh"

namespace flash {
constexpr int BT = 64;  // rows of a query or key tile
// Exponentials are taken base 2 (one ex2 instruction; expf's range reduction took more):
// exp(x) = 2^(x · log2 e); L stays natural.
constexpr float LOG2E = 1.4426950408889634f, LN2 = 0.6931471805599453f;

// Two 64-row tiles (x: roped by the tables from row p0 on, as attn::stage does; z: as it
// is), rows of E from global memory into shared tiles of row stride E + 8, by the block's
// 128 threads. z goes by cp.async, through no register; every load of x and its tables is
// issued before the first store, so that the tiles wait one memory latency, not one per
// 16-byte chunk (attn::stage's loop waits each). The caller's barrier then publishes both.
template <int E>
__device__ __forceinline__ void stage2(const bf16 *__restrict__ x, size_t ldx, bf16 *xs, const bf16 *__restrict__ z,
                                       size_t ldz, bf16 *zs, const float *__restrict__ cos_t,
                                       const float *__restrict__ sin_t, int p0) {
  constexpr int PER = BT * (E / 8) / 128, LE = E + 8;  // 16-byte chunks a thread, a tile
  uint4 vx[PER];
  float4 cs[PER], sn[PER];
#pragma unroll
  for (int i = 0; i < PER; i++) {
    const int c = threadIdx.x + i * 128, r = c / (E / 8), col = (c % (E / 8)) * 8;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(mma::smem(zs + r * LE + col)),
                 "l"(z + r * ldz + col));
    vx[i] = *reinterpret_cast<const uint4 *>(x + r * ldx + col);
    const int at = (p0 + r) * (E / 2) + col / 2;
    cs[i] = *reinterpret_cast<const float4 *>(cos_t + at);
    sn[i] = *reinterpret_cast<const float4 *>(sin_t + at);
  }
  asm volatile("cp.async.commit_group;\n" ::);
#pragma unroll
  for (int i = 0; i < PER; i++) {
    const int c = threadIdx.x + i * 128, r = c / (E / 8), col = (c % (E / 8)) * 8;
    const bf16 *h = reinterpret_cast<const bf16 *>(&vx[i]);
    const float cc[4] = {cs[i].x, cs[i].y, cs[i].z, cs[i].w}, ss[4] = {sn[i].x, sn[i].y, sn[i].z, sn[i].w};
    float f[8];
#pragma unroll
    for (int k = 0; k < 8; k++) f[k] = to_f(h[k]);
    rope_turn4(f, cc, ss, false);
    store16(xs + r * LE + col, f);
  }
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}
}  // namespace flash

// Forward. qkv: the qkv projection's rows (b, T, 3, h, E); y: (b, T, h, E); lse: (b, h, T).
// Shared memory: q, k, v tiles (64 rows of E + 8); a warp's q rows stage its output at the
// end. A lane holds rows g and g + 8 of its warp's 16 (mma.cuh), each row's running max and
// sum in base-2 units, the sum over the lane's columns only until the end.
template <int E>
__device__ void flash_fwd(const bf16 *qkv, const float *cos_t, const float *sin_t, bf16 *y, float *lse,
                          int Bn, int H, int T, float scale) {
  using namespace flash;
  constexpr int KB = E / 16, NE = E / 8, LE = E + 8;
  extern __shared__ float flash_fwd_sm[];
  const int nt = T / BT, bh = blockIdx.x % (Bn * H), qt = nt - 1 - blockIdx.x / (Bn * H);
  const int b = bh / H, h = bh % H, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3, r0 = warp * 16 + g, i0 = qt * BT;
  bf16 *qs = reinterpret_cast<bf16 *>(flash_fwd_sm), *ks = qs + BT * LE, *vs = ks + BT * LE;
  bf16 *qw = qs + warp * 16 * LE;
  const uint32_t qa = mma::smem(qw) + 2 * mma::a_lane<LE>(), kb = mma::smem(ks) + 2 * mma::b_lane<LE>();
  const uint32_t vt = mma::smem(vs) + 2 * mma::t_lane<LE>();
  const size_t ldy = (size_t)H * E, ldr = 3 * ldy;
  const bf16 *rows = qkv + (size_t)b * T * ldr + (size_t)h * E;
  attn::stage<E>(rows + (size_t)i0 * ldr, ldr, qs, LE, BT, cos_t + i0 * (E / 2), sin_t + i0 * (E / 2), true);
  float o[NE][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  mma::zero(o);
  const float sl = scale * LOG2E;
  for (int j = 0; j <= qt; j++) {
    const int j0 = j * BT;
    __syncthreads();  // every warp is done with the last tile's k and v
    stage2<E>(rows + (size_t)j0 * ldr + ldy, ldr, ks, rows + (size_t)j0 * ldr + 2 * ldy, ldr, vs, cos_t, sin_t, j0);
    __syncthreads();
    float s[8][4];
    mma::zero(s);
    mma::rows_yt<KB, 8, LE>(s, qa, kb);
    // The online softmax over this tile: x = scale · log2 e · S, masked above the diagonal.
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int col = n * 8 + 2 * t + (e & 1), row = r0 + (e >> 1) * 8;
        s[n][e] = (j == qt && col > row) ? -INFINITY : s[n][e] * sl;
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
    mma::regs_y<4, NE, LE>(o, pa, vt);
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
  mma::put_rows<NE>(o, qw, LE, cos_t, sin_t, 0, false);
  mma::copy_rows<E>(qw, LE, y + ((size_t)b * T + i0 + warp * 16) * ldy + (size_t)h * E, ldy);
  if (t == 0)
#pragma unroll
    for (int hh = 0; hh < 2; hh++) lse[(size_t)bh * T + i0 + r0 + hh * 8] = (m[hh] + log2f(l[hh])) * LN2;
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
// (64 rows of E + 8: q, dY, k, v) and the L and D of 64 query rows (f32). A warp's 16 rows
// of the block's own tiles (k and v, or q) are read by it alone, and stage its output.
// The two kinds are one body, compiled apart (`keys`), so that neither carries the other's
// selects and registers.
template <int E, bool keys>
__device__ __forceinline__ void flash_bwd_block(const bf16 *qkv, const float *cos_t, const float *sin_t,
                                                const float *lse, const float *dot, const bf16 *dy, bf16 *out,
                                                int Bn, int H, int T, float scale) {
  using namespace flash;
  constexpr int KB = E / 16, NE = E / 8, LE = E + 8;
  extern __shared__ float flash_bwd_sm[];
  const int nt = T / BT, BH = Bn * H, rest = blockIdx.x >> 1, bh = rest % BH, rank = rest / BH;
  const int tile = keys ? rank : nt - 1 - rank, t0 = tile * BT;
  const int b = bh / H, h = bh % H, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3, r0 = warp * 16 + g;
  bf16 *qs = reinterpret_cast<bf16 *>(flash_bwd_sm), *dys = qs + BT * LE, *ks = dys + BT * LE, *vs = ks + BT * LE;
  float *ls = reinterpret_cast<float *>(vs + BT * LE), *dd = ls + BT;
  const int wr = warp * 16 * LE;  // the warp's rows in a tile
  // Shared addresses for the products: the warp's rows as A operands, the tiles' rows as B
  // operands, transposed (mma.cuh).
  const uint32_t base = mma::smem(qs), tb = 2 * BT * LE;
  const uint32_t ra = base + 2 * (wr + mma::a_lane<LE>()), rb = base + 2 * mma::b_lane<LE>();
  const uint32_t rt = base + 2 * mma::t_lane<LE>();  // + tb · (0 q, 1 dY, 2 k, 3 v)
  const size_t ldy = (size_t)H * E, ldr = 3 * ldy;
  const bf16 *rows = qkv + (size_t)b * T * ldr + (size_t)h * E;
  const bf16 *dyh = dy + (size_t)b * T * ldy + (size_t)h * E;
  const float *lh = lse + (size_t)bh * T, *dh = dot + (size_t)bh * T;
  // The tiles this block keeps: k and v (∂k, ∂v), or q and dY (∂q).
  if (keys)
    stage2<E>(rows + (size_t)t0 * ldr + ldy, ldr, ks, rows + (size_t)t0 * ldr + 2 * ldy, ldr, vs, cos_t, sin_t, t0);
  else
    stage2<E>(rows + (size_t)t0 * ldr, ldr, qs, dyh + (size_t)t0 * ldy, ldy, dys, cos_t, sin_t, t0);
  float acc[NE][4], acc2[NE][4];
  mma::zero(acc);
  mma::zero(acc2);
  // The ∂q block's own rows' L (base-2 units, as the exponent's argument) and D.
  float L[2] = {0.0f, 0.0f}, D[2] = {0.0f, 0.0f};
  if (!keys)
#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
      L[hh] = lh[t0 + r0 + hh * 8] * LOG2E;
      D[hh] = dh[t0 + r0 + hh * 8];
    }
  const float sl = scale * LOG2E;
  const int first = keys ? tile : 0, last = keys ? nt - 1 : tile;
  for (int u = first; u <= last; u++) {
    const int u0 = u * BT;
    __syncthreads();  // every warp is done with the last tile
    if constexpr (keys) {
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
    float s[8][4], dp[8][4];
    mma::zero(s);
    mma::zero(dp);
    mma::rows_yt<KB, 8, LE>(s, ra + (keys ? 2 * tb : 0), rb + (keys ? 0 : 2 * tb));
    mma::rows_yt<KB, 8, LE>(dp, ra + (keys ? 3 * tb : tb), rb + (keys ? tb : 3 * tb));
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int col = n * 8 + 2 * t + (e & 1), row = r0 + (e >> 1) * 8;
        const bool masked = diag && (keys ? row > col : col > row);
        const float lv = keys ? ls[col] : L[e >> 1], dv = keys ? dd[col] : D[e >> 1];
        const float p = masked ? 0.0f : exp2f(s[n][e] * sl - lv);
        s[n][e] = p;
        dp[n][e] = scale * p * (dp[n][e] - dv);
      }
    uint32_t pa[4][4], ga[4][4];
    mma::to_a<8>(ga, dp);
    if constexpr (keys) {
      mma::to_a<8>(pa, s);
      mma::regs_y<4, NE, LE>(acc, ga, rt);        // ∂k += dSᵀ q
      mma::regs_y<4, NE, LE>(acc2, pa, rt + tb);  // ∂v += Pᵀ dY
    } else {
      mma::regs_y<4, NE, LE>(acc, ga, rt + 2 * tb);  // ∂q += dS k
    }
  }
  bf16 *o = out + ((size_t)b * T + t0 + warp * 16) * ldr + (size_t)h * E;
  __syncwarp();
  if (keys) {
    mma::put_rows<NE>(acc, ks + wr, LE, cos_t, sin_t, t0 + warp * 16, true);
    mma::put_rows<NE>(acc2, vs + wr, LE, cos_t, sin_t, 0, false);
    mma::copy_rows<E>(ks + wr, LE, o + ldy, ldr);
    mma::copy_rows<E>(vs + wr, LE, o + 2 * ldy, ldr);
  } else {
    mma::put_rows<NE>(acc, qs + wr, LE, cos_t, sin_t, t0 + warp * 16, true);
    mma::copy_rows<E>(qs + wr, LE, o, ldr);
  }
}
template <int E>
__device__ void flash_bwd(const bf16 *qkv, const float *cos_t, const float *sin_t, const float *lse,
                          const float *dot, const bf16 *dy, bf16 *out, int Bn, int H, int T, float scale) {
  if (blockIdx.x & 1)
    flash_bwd_block<E, true>(qkv, cos_t, sin_t, lse, dot, dy, out, Bn, H, T, scale);
  else
    flash_bwd_block<E, false>(qkv, cos_t, sin_t, lse, dot, dy, out, Bn, H, T, scale);
}

// The tiled attention's (flash.cuh) loads and block order: 64-row tiles copied into shared
// memory by cp.async in stages, each loop's step over them (advance), and which (batch ·
// head, tile) a block takes (order). Part of fused.cu.
#pragma once
#include "mma.cuh"

namespace flash {
constexpr int BT = 64;  // rows of a query or key tile
// A 64-row tile of E bf16 (rows ld apart) into shared rows of E + 8, by the block's 128
// threads, 16 bytes a cp.async: issued, not waited (commit and wait are the caller's). Where
// C = E / 8, a row's chunks, divides 128, a thread takes one chunk of every 128 / C rows: one
// address of each side, then fixed steps (immediates where ld is a constant). Computing each
// chunk's row and column from its own index (signed, until session 52) kept eight 64-bit
// addresses a tile alive across the loop: at E = 128 they spilled, and reloading them was a
// tenth of the forward's stalls and more of flash_bwd_kv's (call 285's source counters).
template <int E> __device__ __forceinline__ void tile(const bf16 *src, size_t ld, bf16 *dst) {
  constexpr unsigned C = E / 8, PER = BT * C / 128, LE = E + 8;
  if constexpr (128 % C == 0) {
    constexpr unsigned RP = 128 / C;  // rows a pass
    const unsigned r = threadIdx.x / C, col = threadIdx.x % C * 8;
    const bf16 *s = src + r * ld + col;
    const uint32_t d = mma::smem(dst + r * LE + col);
#pragma unroll
    for (unsigned i = 0; i < PER; i++)
      // As mma::cp16 writes it; through cp16 the odd-tile flash_bwd_q's PTX came out in
      // another order (session 58), not measured on a GPU, so this one stays spelled out.
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d + i * RP * LE * 2), "l"(s + i * RP * ld));
  } else {
#pragma unroll
    for (unsigned i = 0; i < PER; i++) {
      const unsigned c = threadIdx.x + i * 128, r = c / C, col = c % C * 8;
      mma::cp16(mma::smem(dst + r * LE + col), src + r * ld + col);
    }
  }
}
// 64 f32 of each of a and b into shared as and bs, as tile does (threads 0-31).
__device__ __forceinline__ void rows64(const float *a, float *as, const float *b, float *bs) {
  if (threadIdx.x < 32) {
    const int i = (threadIdx.x & 15) * 4;
    const float *s = threadIdx.x < 16 ? a : b;
    float *d = threadIdx.x < 16 ? as : bs;
    mma::cp16(mma::smem(d + i), s + i);
  }
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N committed groups of this thread are still in flight.
template <int N> __device__ __forceinline__ void wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
// The step at the top of each of flash.cuh's loops, of S stages: where `more`, the loads (`load`) of
// the tile S - 1 steps ahead, into the stage the last iteration's closing barrier freed, are
// issued and left in flight; then this stage's are waited for, and a barrier puts them in
// every thread's view. Above two stages every step commits a group, empty where not `more`.
template <int S = 2, class F> __device__ __forceinline__ void advance(bool more, F &&load) {
  if (more) load();
  if (S > 2 || more) {
    commit();
    wait<S - 1>();
  } else {
    wait<0>();
  }
  __syncthreads();
}
// Stages of flash_bwd_q's loads, whose dSᵀ tiles come from DRAM: three where two blocks
// share an SM (two query tiles a block above E = 64), so that a tile is asked for two steps
// before it is used; two where three blocks do (three stages would leave room for two).
template <int E, int MT> __host__ __device__ constexpr int q_stages() { return MT == 2 && E > 64 ? 3 : 2; }
// The block's (batch · head, rank) in a grid of BH × n blocks, rank 0 the heaviest. The
// heavier ranks (all but the lightest n / 4) run in groups of G heads (the fewest that divide
// BH and fill about a wave of 256 blocks), each group's heaviest first, so that the blocks of
// a head read its tiles close in time, from L2; then the lightest ranks of every head,
// heaviest first, so that the grid still ends on its lightest blocks. Heaviest first across
// the whole grid (until session 52) spread a head's blocks a wave apart: at the 6.7B's heads
// the tiled kernels read 1.5 to 3.7 times the DRAM bytes they read so grouped (calls 286,
// 287).
__device__ __forceinline__ void order(int BH, int n, int &bh, int &rank) {
  const int heavy = n - n / 4, x = blockIdx.x;
  if (x >= BH * heavy) {
    rank = heavy + (x - BH * heavy) / BH;
    bh = (x - BH * heavy) % BH;
    return;
  }
  int G = (256 + n - 1) / n;
  while (G < BH && BH % G) G++;
  G = min(G, BH);
  const int g0 = x / (G * heavy) * G, in = x - g0 * heavy, gs = min(G, BH - g0);
  rank = in / gs;
  bh = g0 + in % gs;
}
}  // namespace flash

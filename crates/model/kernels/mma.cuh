// Warp-level bf16 tensor-core products written in PTX (mma.sync m16n8k16, f32 accumulate;
// ldmatrix), whose register layouts the PTX ISA fixes, unlike wmma's. So an accumulator
// tile becomes the A operand of the next product in registers (as FlashAttention-2 keeps
// P and dS), with no trip through shared memory.
//
// A lane (g = lane / 4, t = lane % 4) holds, of a 16 × 8 f32 accumulator float[4], the rows
// g (elements 0, 1) and g + 8 (2, 3), columns 2t and 2t + 1. The A operand of 16 × 16 is
// four registers of two bf16: rows g, g + 8, g, g + 8 at columns 2t + {0, 1}, the same,
// then + 8, the same, + 8; so two accumulators side by side (16 columns) are one A operand
// (`to_a`). A B operand (16 × 8) is two registers: rows 2t + {0, 1} and 2t + 8 + {0, 1} of
// column g.
//
// Tiles are bf16 in shared memory, row-major; the products read 16 × 16 pieces with
// ldmatrix (x4: four 8 × 8 matrices, one lane's address per matrix row). A row stride of
// E + 8 elements keeps the eight rows of a matrix in different banks.
#pragma once
#include "common.cuh"

namespace mma {
__device__ __forceinline__ uint32_t smem(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// 16 bytes from global src to the shared-memory address at by cp.async: issued, not waited
// (the attention kernels' staging: attn.cuh, stage.cuh).
__device__ __forceinline__ void cp16(uint32_t at, const void *src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(at), "l"(src));
}
// Four 8 × 8 matrices from the shared-memory address (state space .shared) a lane gives.
__device__ __forceinline__ void ldm(uint32_t (&r)[4], uint32_t at) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(at));
}
__device__ __forceinline__ void ldm_t(uint32_t (&r)[4], uint32_t at) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(at));
}
// d += a · b (16 × 16 by 16 × 8).
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// Two floats as one register of two bf16 (lo in the low half, the lower column).
__device__ __forceinline__ uint32_t pack(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t *>(&v);
}

// The lane's offsets (elements) into a tile of row stride LD for the products below: the
// A operand's rows (x in rows_yt), the B operand's rows (y in rows_yt) and the transposed
// B operand's (y in regs_y). Addresses are the tile's shared address plus the lane's
// offset, so the unrolled loads differ by constants.
template <int LD> __device__ __forceinline__ int a_lane() {
  const int l = threadIdx.x & 31;
  return (l & 15) * LD + (l >> 4) * 8;
}
template <int LD> __device__ __forceinline__ int b_lane() {
  const int l = threadIdx.x & 31;
  return ((l & 7) + (l >> 4) * 8) * LD + ((l >> 3) & 1) * 8;
}
template <int LD> __device__ __forceinline__ int t_lane() {
  const int l = threadIdx.x & 31;
  return ((l & 7) + ((l >> 3) & 1) * 8) * LD + (l >> 4) * 8;
}

// acc[i][n] += x_i · yᵀ: MT tiles x_i of 16 rows (x_i at x + i·xs bytes) against y's 8·NT
// rows, over 16·KB columns of both (row stride LD); x, y: shared addresses plus a_lane,
// b_lane. Each of y's fragments is read once for the MT tiles: at 16 rows a warp the
// ldmatrix reads outnumber the products' issue slots (E = 128: 72 reads to 128 products a
// key tile; at 32 rows, 80 to 256). The A operand's matrices: rows 0-7 and 8-15 at column 0,
// then at column 8; the B operand's: y rows 0-7 at columns 0 and 8 (tile n), rows 8-15 the
// same (tile n + 1).
template <int MT, int KB, int NT, int LD>
__device__ __forceinline__ void rows_yt(float (&acc)[MT][NT][4], uint32_t x, uint32_t xs, uint32_t y) {
#pragma unroll
  for (int kk = 0; kk < KB; kk++) {
    uint32_t a[MT][4];
#pragma unroll
    for (int i = 0; i < MT; i++) ldm(a[i], x + i * xs + kk * 32);
#pragma unroll
    for (int n = 0; n < NT; n += 2) {
      uint32_t b[4];
      ldm(b, y + (n * 8 * LD + kk * 16) * 2);
#pragma unroll
      for (int i = 0; i < MT; i++) {
        mma(acc[i][n], a[i], b[0], b[1]);
        mma(acc[i][n + 1], a[i], b[2], b[3]);
      }
    }
  }
}
// One tile of 16 rows (MT = 1).
template <int KB, int NT, int LD>
__device__ __forceinline__ void rows_yt(float (&acc)[NT][4], uint32_t x, uint32_t y) {
  rows_yt<1, KB, NT, LD>(reinterpret_cast<float (&)[1][NT][4]>(acc), x, 0, y);
}

// acc[i][n] += a_i · y: MT A operands a_i (16 × 16, in registers) against 16 rows × 8·NT
// columns of y from element `at` on (shared address plus t_lane), transposed by ldmatrix
// as loaded, each fragment once for the MT tiles: matrices at rows 0-7 and 8-15 of columns
// 0-7 (tile n), then of columns 8-15.
template <int MT, int NT>
__device__ __forceinline__ void a_y(float (&acc)[MT][NT][4], const uint32_t (&a)[MT][4], uint32_t y, int at) {
#pragma unroll
  for (int n = 0; n < NT; n += 2) {
    uint32_t b[4];
    ldm_t(b, y + (at + n * 8) * 2);
#pragma unroll
    for (int i = 0; i < MT; i++) {
      mma(acc[i][n], a[i], b[0], b[1]);
      mma(acc[i][n + 1], a[i], b[2], b[3]);
    }
  }
}

// acc[i][n] += p_i · y: MT tiles p_i of 16 rows × 16·KB columns as A operands in registers,
// y's 16·KB rows × 8·NT columns (as a_y's).
template <int MT, int KB, int NT, int LD>
__device__ __forceinline__ void regs_y(float (&acc)[MT][NT][4], const uint32_t (&p)[MT][KB][4], uint32_t y) {
#pragma unroll
  for (int kk = 0; kk < KB; kk++) {
    uint32_t a[MT][4];
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
      for (int q = 0; q < 4; q++) a[i][q] = p[i][kk][q];
    a_y<MT, NT>(acc, a, y, kk * 16 * LD);
  }
}
// One tile of 16 rows (MT = 1).
template <int KB, int NT, int LD>
__device__ __forceinline__ void regs_y(float (&acc)[NT][4], const uint32_t (&p)[KB][4], uint32_t y) {
  regs_y<1, KB, NT, LD>(reinterpret_cast<float (&)[1][NT][4]>(acc), reinterpret_cast<const uint32_t (&)[1][KB][4]>(p), y);
}

// acc[i][n] += x_iᵀ · y: MT tiles x_i of 16 columns (x_i at x + i·xs bytes: the warp's rows
// of x_iᵀ) over 16·KB rows of x_i (row stride LX) and of y (16·KB × 8·NT, row stride LY).
// x: shared address plus b_lane (ldmatrix.trans gives its 8 × 8 matrices transposed, in the
// A operand's order); y: plus t_lane, as in regs_y.
template <int MT, int KB, int NT, int LX, int LY>
__device__ __forceinline__ void cols_y(float (&acc)[MT][NT][4], uint32_t x, uint32_t xs, uint32_t y) {
#pragma unroll
  for (int kk = 0; kk < KB; kk++) {
    uint32_t a[MT][4];
#pragma unroll
    for (int i = 0; i < MT; i++) ldm_t(a[i], x + i * xs + kk * 16 * LX * 2);
    a_y<MT, NT>(acc, a, y, kk * 16 * LY);
  }
}

// Accumulators set to zero.
template <int NT> __device__ __forceinline__ void zero(float (&acc)[NT][4]) {
#pragma unroll
  for (int n = 0; n < NT; n++) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
}

// 16 rows × 8·NT columns of accumulators as the A operands of the next product (bf16).
template <int NT>
__device__ __forceinline__ void to_a(uint32_t (&p)[NT / 2][4], const float (&s)[NT][4]) {
#pragma unroll
  for (int i = 0; i < NT / 2; i++) {
    p[i][0] = pack(s[2 * i][0], s[2 * i][1]);
    p[i][1] = pack(s[2 * i][2], s[2 * i][3]);
    p[i][2] = pack(s[2 * i + 1][0], s[2 * i + 1][1]);
    p[i][3] = pack(s[2 * i + 1][2], s[2 * i + 1][3]);
  }
}

// A operands p (16 rows × 16·KB columns, as to_a makes them) to a warp's 16 bf16 rows x
// (row stride ld).
template <int KB> __device__ __forceinline__ void put_a(const uint32_t (&p)[KB][4], bf16 *x, int ld) {
  const int l = threadIdx.x & 31, g = l >> 2, t = l & 3;
#pragma unroll
  for (int i = 0; i < KB; i++)
#pragma unroll
    for (int q = 0; q < 4; q++)
      *reinterpret_cast<uint32_t *>(x + (g + (q & 1) * 8) * ld + i * 16 + (q >> 1) * 8 + 2 * t) = p[i][q];
}

// 16 rows × 8·NT columns of accumulators to a warp's 16 bf16 rows x (row stride ld); when
// `unrotate`, each interleaved pair of row r turned back by RoPE's angle at position p0 + r
// (tables of E / 2 = 4·NT pairs a position).
template <int NT>
__device__ __forceinline__ void put_rows(const float (&acc)[NT][4], bf16 *x, int ld, const float *cos_t,
                                         const float *sin_t, int p0, bool unrotate) {
  const int l = threadIdx.x & 31, g = l >> 2, t = l & 3;
#pragma unroll
  for (int n = 0; n < NT; n++)
#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
      const int r = g + hh * 8;
      float2 v = make_float2(acc[n][2 * hh], acc[n][2 * hh + 1]);
      if (unrotate) {
        const int at = (p0 + r) * (NT * 4) + n * 4 + t;
        v = rope_turn(v.x, v.y, cos_t[at], -sin_t[at]);
      }
      *reinterpret_cast<uint32_t *>(x + r * ld + n * 8 + 2 * t) = pack(v.x, v.y);
    }
}

// A warp's 16 rows of E bf16 (row stride ld in shared memory) to global memory (row
// stride ldo), 16 bytes a load and store.
template <int E>
__device__ __forceinline__ void copy_rows(const bf16 *x, int ld, bf16 *out, size_t ldo) {
  __syncwarp();
  for (int c = threadIdx.x & 31; c < 16 * (E / 8); c += 32) {
    const int r = c / (E / 8), col = (c % (E / 8)) * 8;
    *reinterpret_cast<uint4 *>(out + r * ldo + col) = *reinterpret_cast<const uint4 *>(x + r * ld + col);
  }
}
}  // namespace mma

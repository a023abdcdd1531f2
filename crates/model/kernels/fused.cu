// Fused forward and backward kernels for the LM's element-wise and row-wise ops, f32 and
// bf16 (computed in f32, rounded once). Every kernel has the same argument tail after its
// buffers: (int n0, int n1, int n2, float f) — see src/kernels/gpu.rs. Derivations:
// docs/kernels.md.
//
//   causal_softmax_fwd  y = softmax(scale·x) over each row, entries j > q masked (q = the
//                       row's query position, rows of (…, tq, tk) scores; n0 rows, n1 = tk,
//                       n2 = tq)
//   causal_softmax_bwd  dx = scale · y ⊙ (g − Σ g⊙y)
//   causal_softmax_*_v  the same with each lane's 4 consecutive entries in registers
//                       (tk % 4 == 0, tk <= 512)
//   rope                interleaved pairs (x[2i], x[2i+1]) of (…, t, d) rotated by pos·θ_i;
//                       f = +1 forward, −1 backward (the transpose is the inverse rotation)
//   qkv_rope_split      qkv rows (b·t, 3, h, e) → (3, b, h, t, e), q and k roped (n0 = b·t,
//                       n1 = t, n2 = h, f = e); qkv_rope_merge: its backward, dq, dk, dv
//                       (b, h, t, e) → (b·t, 3, h, e), q and k rotated back
//   silu_mul_fwd        y = silu(a) ⊙ b
//   silu_mul_bwd        out[0:n] = ∂a, out[n:2n] = ∂b
//   xent_fwd            per-row loss = logsumexp(l) − l[target] (f32/bf16 logits, u32 targets)
//   xent_bwd            ∂l = g_row · (softmax(l) − onehot(target))
//   rmsnorm_fwd/_dx     as kernels/rmsnorm.cu, for bf16 inputs with f32 statistics
//   rmsnorm_dw_part     ∂w partial sums over blocks of n2 rows (f32 out; n0 rows, n1 cols)
//   cast_f32_bf16_x4    f32 → bf16, four at a time (n0 elements)
//   rmsnorm_dx_rs(_add) ∂x (+ a residual gradient) and each row's inverse RMS (to the extra
//                       f32 buffer after the output); n0 rows, n1 cols
//   rmsnorm_dw_rs       ∂w partial sums over chunks of n2 rows from x, g and those RMS
//   rmsnorm_fwd_v       the forward, one warp per row, 16-byte loads (n0 rows, n1 cols)
//   rmsnorm_bwd_v(_add) ∂x (+ residual) and ∂w partial sums per block (the extra f32
//                       buffer, (blocks, n1)) in one kernel; n2 rows per warp; dynamic
//                       shared memory of warps × n1 f32
//   rmsnorm_bwd_w(_add) the same for wide rows (n1 ≤ 128 · RW_C · 16 / sizeof(T)): 128
//                       threads a block, n2 rows a block, no dynamic shared memory
//   colsum_f32          column sums of (n0, n1) f32 (the ∂w partials), 256 threads per 32
//                       columns, deterministic
//   add                 y = a + b, same shape, 16 bytes at a time (n0 elements)
//   embed_fwd/_bwd      token rows of an f32 table in T; ∂table (f32), one block per row
//   swap12              (A, B, C, E) → (A, C, B, E) in 16-byte chunks (n0 = A, n1 = B,
//                       n2 = C, f = E's bytes / 16)
//   transpose2d         (n0, n1) → (n1, n0), 32 × 32 shared-memory tiles, 256 threads
//   attn_fwd_eE_bf16    causal attention from the qkv projection's rows (b, T, 3, h, E) bf16
//                       with RoPE tables cos, sin (T, E/2) f32 (q, k roped as staged): out =
//                       P (b, h, T, T) then Y (b, T, h, E); one block per (b, h), T / 16 warps
//                       (n0 = b, n1 = h, n2 = T, f = scale); E = 16, 32, …, 128
//   attn_bwd_eE_bf16    its backward from the rows, tables, P, Y and dY (both (b, T, h, E)):
//                       out = ∂qkv rows (b, T, 3, h, E), ∂q and ∂k turned back
//   flash_fwd_eE_bf16   the same for T a multiple of 64 (flash.cuh, tiled, no T × T matrix)
//                       from q, k (roped) and v as heads (3, b, h, T, E) (qkv_rope_split's):
//                       out = Y (b, T, h, E), extra = each row's log-sum-exp in base 2 of
//                       the scaled scores (b, h, T) f32; b·h·T/64 blocks of 128 threads
//                       (n0 = b, n1 = h, n2 = T, f = scale); flash_fwd2_eE_bf16 the same
//                       for T a multiple of 128, b·h·T/128 blocks (two query tiles each)
//   flash_dot_eE_bf16   D = dY · Y per row and head from Y and dY (b, T, h, E): out (b, h, T)
//                       f32, a thread per (b, t, h) (n0 = b, n1 = h, n2 = T)
//   flash_bwd_kv_eE_bf16 the tiled backward's ∂k, ∂v from the heads, tables, log-sum-exp, D
//                       and dY: outs = dSᵀ of every tile pair (flash.cuh), ∂qkv rows (their k
//                       and v); flash_bwd_q_eE_bf16 then ∂q from the heads, tables and dSᵀ into
//                       the same ∂qkv rows; b·h·T/64 blocks of 128 threads each
//                       (flash_bwd_q2_eE_bf16: T a multiple of 128, b·h·T/128 blocks)
// The kernels live in one header per family, included in this order; this file holds
// the exported entry points.
#include "common.cuh"
#include "softmax.cuh"
#include "rope.cuh"
#include "swiglu.cuh"
#include "xent.cuh"
#include "rmsnorm.cuh"
#include "cast.cuh"
#include "norm_bwd.cuh"
#include "layout.cuh"
#include "embed.cuh"
#include "attn.cuh"
#include "flash.cuh"

// ---- the exported entry points, one per dtype -----------------------------------------
#define FOR_DTYPES(M) M(float, f32) M(bf16, bf16)
#define ENTRIES(T, S)                                                                              \
  extern "C" __global__ void causal_softmax_fwd_##S(const T *x, T *y, int n0, int n1, int n2,     \
                                                     float f) {                                    \
    causal_softmax_fwd<T>(x, y, n0, n1, n2, f);                                                    \
  }                                                                                                \
  extern "C" __global__ void causal_softmax_bwd_##S(const T *y, const T *g, T *dx, int n0, int n1, \
                                                     int, float f) {                               \
    causal_softmax_bwd<T>(y, g, dx, n0, n1, f);                                                    \
  }                                                                                                \
  extern "C" __global__ void causal_softmax_fwd_v_##S(const T *x, T *y, int n0, int n1, int n2,   \
                                                      float f) {                                   \
    causal_softmax_fwd_v<T>(x, y, n0, n1, n2, f);                                                  \
  }                                                                                                \
  extern "C" __global__ void causal_softmax_bwd_v_##S(const T *y, const T *g, T *dx, int n0,       \
                                                      int n1, int, float f) {                      \
    causal_softmax_bwd_v<T>(y, g, dx, n0, n1, f);                                                  \
  }                                                                                                \
  extern "C" __global__ void rope_##S(const T *x, const float *c, const float *s, T *y, int n0,    \
                                      int n1, int n2, float f) {                                   \
    rope<T>(x, c, s, y, n0, n1, n2, f);                                                            \
  }                                                                                                \
  extern "C" __global__ void qkv_rope_split_##S(const T *qkv, const float *c, const float *s, T *y,  \
                                                int n0, int n1, int n2, float f) {                 \
    qkv_rope_split<T>(qkv, c, s, y, n0, n1, n2, (int)f);                                           \
  }                                                                                                \
  extern "C" __global__ void qkv_rope_merge_##S(const T *dq, const T *dk, const T *dv,              \
                                                const float *c, const float *s, T *y, int n0,      \
                                                int n1, int n2, float f) {                         \
    qkv_rope_merge<T>(dq, dk, dv, c, s, y, n0, n1, n2, (int)f);                                    \
  }                                                                                                \
  extern "C" __global__ void qkv_rope_split_v_##S(const T *qkv, const float *c, const float *s,     \
                                                  T *y, int n0, int n1, int n2, float f) {         \
    qkv_rope_split_v<T>(qkv, c, s, y, n0, n1, n2, (int)f);                                         \
  }                                                                                                \
  extern "C" __global__ void qkv_rope_merge_v_##S(const T *dq, const T *dk, const T *dv,            \
                                                  const float *c, const float *s, T *y, int n0,    \
                                                  int n1, int n2, float f) {                       \
    qkv_rope_merge_v<T>(dq, dk, dv, c, s, y, n0, n1, n2, (int)f);                                  \
  }                                                                                                \
  extern "C" __global__ void silu_mul_fwd_##S(const T *a, const T *b, T *y, int n0, int, int,      \
                                               float) {                                            \
    silu_mul_fwd<T>(a, b, y, n0);                                                                  \
  }                                                                                                \
  extern "C" __global__ void silu_mul_bwd_##S(const T *a, const T *b, const T *g, T *out, int n0,  \
                                               int, int, float) {                                  \
    silu_mul_bwd<T>(a, b, g, out, n0);                                                             \
  }                                                                                                \
  extern "C" __global__ void rmsnorm_fwd_##S(const T *x, const T *w, T *y, int, int n1, int,       \
                                              float f) {                                           \
    rmsnorm_fwd<T>(x, w, y, n1, f);                                                                \
  }                                                                                                \
  extern "C" __global__ void rmsnorm_dx_##S(const T *x, const T *w, const T *g, T *dx, int,        \
                                             int n1, int, float f) {                               \
    rmsnorm_dx<T>(x, w, g, dx, n1, f);                                                             \
  }                                                                                                \
  extern "C" __global__ void rmsnorm_dw_part_##S(const T *x, const T *g, float *part, int n0,      \
                                                  int n1, int n2, float f) {                       \
    rmsnorm_dw_part<T>(x, g, part, n0, n1, n2, f);                                                 \
  }
FOR_DTYPES(ENTRIES)

#define ENTRIES2(T, S)                                                                             \
  extern "C" __global__ void rmsnorm_dx_rs_##S(const T *x, const T *w, const T *g, T *dx,          \
                                               float *rs, int, int n1, int, float f) {             \
    rmsnorm_dx_rs<T, false>(x, w, g, nullptr, dx, rs, n1, f);                                      \
  }                                                                                                \
  extern "C" __global__ void rmsnorm_dx_rs_add_##S(const T *x, const T *w, const T *g,             \
                                                   const T *res, T *dx, float *rs, int, int n1,    \
                                                   int, float f) {                                 \
    rmsnorm_dx_rs<T, true>(x, w, g, res, dx, rs, n1, f);                                           \
  }                                                                                                \
  extern "C" __global__ void rmsnorm_fwd_v_##S(const T *x, const T *w, T *y, int n0, int n1, int,  \
                                                float f) {                                         \
    rmsnorm_fwd_v<T>(x, w, y, n0, n1, f);                                                          \
  }                                                                                                \
  extern "C" __global__ void rmsnorm_bwd_v_##S(const T *x, const T *w, const T *g, T *dx,          \
                                               float *part, int n0, int n1, int n2, float f) {     \
    rmsnorm_bwd_v<T, false>(x, w, g, nullptr, dx, part, n0, n1, n2, f);                            \
  }                                                                                                \
  extern "C" __global__ void rmsnorm_bwd_v_add_##S(const T *x, const T *w, const T *g,             \
                                                   const T *res, T *dx, float *part, int n0,       \
                                                   int n1, int n2, float f) {                      \
    rmsnorm_bwd_v<T, true>(x, w, g, res, dx, part, n0, n1, n2, f);                                 \
  }                                                                                                \
  extern "C" __global__ void rmsnorm_bwd_w_add_##S(const T *x, const T *w, const T *g,             \
                                                   const T *res, T *dx, float *part, int n0,       \
                                                   int n1, int n2, float f) {                      \
    rmsnorm_bwd_w<T, true, RW_C>(x, w, g, res, dx, part, n0, n1, n2, f);                           \
  }                                                                                                \
  extern "C" __global__ void rmsnorm_bwd_w_##S(const T *x, const T *w, const T *g, T *dx,          \
                                               float *part, int n0, int n1, int n2, float f) {     \
    rmsnorm_bwd_w<T, false, RW_C>(x, w, g, nullptr, dx, part, n0, n1, n2, f);                      \
  }                                                                                                \
  extern "C" __global__ void rmsnorm_dw_rs_##S(const T *x, const T *g, const float *rs,            \
                                               float *part, int n0, int n1, int n2, float) {       \
    rmsnorm_dw_rs<T>(x, g, rs, part, n0, n1, n2);                                                  \
  }                                                                                                \
  extern "C" __global__ void add_##S(const T *a, const T *b, T *y, int n0, int, int, float) {      \
    add<T>(a, b, y, n0);                                                                           \
  }                                                                                                \
  extern "C" __global__ void swap12_##S(const T *x, T *y, int n0, int n1, int n2, float f) {       \
    swap12(reinterpret_cast<const uint4 *>(x), reinterpret_cast<uint4 *>(y), n0, n1, n2, (int)f);  \
  }                                                                                                \
  extern "C" __global__ void transpose2d_##S(const T *x, T *y, int n0, int n1, int, float) {       \
    transpose2d<T>(x, y, n0, n1);                                                                  \
  }
FOR_DTYPES(ENTRIES2)

#define ENTRIES3(T, S)                                                                             \
  extern "C" __global__ void embed_fwd_##S(const float *w, const uint32_t *ids, T *y, int n0,      \
                                           int n1, int, float) {                                   \
    embed_fwd<T>(w, ids, y, n0, n1);                                                               \
  }                                                                                                \
  extern "C" __global__ void embed_bwd_##S(const T *g, const uint32_t *ids, float *dw, int n0,     \
                                           int n1, int, float) {                                   \
    embed_bwd<T>(g, ids, dw, n0, n1);                                                              \
  }
FOR_DTYPES(ENTRIES3)

#define ENTRIES4(T, S)                                                                             \
  extern "C" __global__ void xent_fwd_##S(const T *l, const uint32_t *tg, float *loss, int,        \
                                          int n1, int, float) {                                    \
    xent_fwd<T>(l, tg, loss, n1);                                                                  \
  }                                                                                                \
  extern "C" __global__ void xent_bwd_##S(const T *l, const uint32_t *tg, const float *g, T *dl,   \
                                          int, int n1, int, float) {                               \
    xent_bwd<T>(l, tg, g, dl, n1);                                                                 \
  }
FOR_DTYPES(ENTRIES4)

// The GEMM tuner's cold L2 (src/gemm/tune.rs): n 16-byte words of scratch zeroed by a kernel,
// so that in the graph it times the GEMM follows a kernel, as in the step (a memset node
// before it would change the gaps around the GEMM).
extern "C" __global__ void l2_flush(uint4 *p, unsigned long long n) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x)
    p[i] = make_uint4(0, 0, 0, 0);
}

extern "C" __global__ void colsum_f32(const float *x, float *y, int n0, int n1, int, float) {
  colsum_f32(x, y, n0, n1);
}

// One pair of entry points per head width E (a multiple of 16 up to 128): attn_fwd_e64_bf16…
#define ATTN_ENTRIES(E)                                                                            \
  extern "C" __global__ void attn_fwd_e##E##_bf16(const bf16 *qkv, const float *c, const float *s, \
                                                  bf16 *out, int n0, int n1, int n2, float f) {    \
    attn_fwd<E>(qkv, c, s, out, n0, n1, n2, f);                                                    \
  }                                                                                                \
  extern "C" __global__ void attn_bwd_e##E##_bf16(const bf16 *qkv, const float *c, const float *s, \
                                                  const bf16 *p, const bf16 *y, const bf16 *dy,    \
                                                  bf16 *out, int n0, int n1, int n2, float f) {    \
    attn_bwd<E>(qkv, c, s, p, y, dy, out, n0, n1, n2, f);                                          \
  }
ATTN_ENTRIES(16) ATTN_ENTRIES(32) ATTN_ENTRIES(48) ATTN_ENTRIES(64)
ATTN_ENTRIES(80) ATTN_ENTRIES(96) ATTN_ENTRIES(112) ATTN_ENTRIES(128)

// The tiled attention's entry points (flash.cuh), one pair per head width as above, held to
// the registers that let three blocks share an SM up to E = 64 (two above; ∂q, with fewer
// registers, one more). Session 49's backward spilled about 100 bytes a thread at E = 64 so
// held, and held to two blocks it spilled nothing but xl's step at 8 x 1024 took 1.5 %
// longer (call 267: 224.23 against 220.83 ms). The forward of two query tiles a block
// (flash_fwd2) is held to two blocks: at three it spilled 116 bytes a thread at E = 64.
#define FLASH_BLOCKS(E) ((E) <= 64 ? 3 : 2)
#define FLASH_ENTRIES(E)                                                                           \
  extern "C" __global__ void __launch_bounds__(128, FLASH_BLOCKS(E)) flash_fwd_e##E##_bf16(const bf16 *heads, bf16 *y, \
                                                   float *lse, int n0, int n1, int n2, float f) {   \
    flash_fwd<E, 1>(heads, y, lse, n0, n1, n2, f);                                                  \
  }                                                                                                 \
  extern "C" __global__ void __launch_bounds__(128, 2) flash_fwd2_e##E##_bf16(const bf16 *heads, bf16 *y, \
                                                   float *lse, int n0, int n1, int n2, float f) {   \
    flash_fwd<E, 2>(heads, y, lse, n0, n1, n2, f);                                                  \
  }                                                                                                 \
  extern "C" __global__ void __launch_bounds__(128, FLASH_BLOCKS(E)) flash_bwd_kv_e##E##_bf16(const bf16 *heads, const float *c, \
                                                   const float *s, const float *lse, const float *d, \
                                                   const bf16 *dy, bf16 *ds, bf16 *out, int n0, int n1, \
                                                   int n2, float f) {                               \
    flash_bwd_kv<E>(heads, c, s, lse, d, dy, ds, out, n0, n1, n2, f);                              \
  }                                                                                                 \
  extern "C" __global__ void __launch_bounds__(128, FLASH_BLOCKS(E) + 1) flash_bwd_q_e##E##_bf16(const bf16 *heads, const float *c, \
                                                   const float *s, const bf16 *ds, bf16 *out, int n0, \
                                                   int n1, int n2, float) {                         \
    flash_bwd_q<E, 1>(heads, c, s, ds, out, n0, n1, n2);                                            \
  }                                                                                                 \
  extern "C" __global__ void __launch_bounds__(128, FLASH_BLOCKS(E)) flash_bwd_q2_e##E##_bf16(const bf16 *heads, const float *c, \
                                                   const float *s, const bf16 *ds, bf16 *out, int n0, \
                                                   int n1, int n2, float) {                         \
    flash_bwd_q<E, 2>(heads, c, s, ds, out, n0, n1, n2);                                            \
  }                                                                                                 \
  extern "C" __global__ void flash_dot_e##E##_bf16(const bf16 *y, const bf16 *dy, float *out, int n0, \
                                                   int n1, int n2, float) {                         \
    flash_dot<E>(y, dy, out, n0, n1, n2);                                                           \
  }
FLASH_ENTRIES(16) FLASH_ENTRIES(32) FLASH_ENTRIES(48) FLASH_ENTRIES(64)
FLASH_ENTRIES(80) FLASH_ENTRIES(96) FLASH_ENTRIES(112) FLASH_ENTRIES(128)

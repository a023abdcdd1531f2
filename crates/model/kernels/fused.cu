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
//   add                 y = a + b, same shape, 16 bytes at a time (n0 elements)
//   embed_fwd/_bwd      token rows of an f32 table in T; ∂table (f32), one block per row
//   swap12              (A, B, C, E) → (A, C, B, E) in 16-byte chunks (n0 = A, n1 = B,
//                       n2 = C, f = E's bytes / 16)
//   transpose2d         (n0, n1) → (n1, n0), 32 × 32 shared-memory tiles, 256 threads
#include "common.cuh"

// ---- causal softmax: one warp per row ------------------------------------------------
template <typename T>
__device__ void causal_softmax_fwd(const T *x, T *y, int rows, int cols, int tq, float scale) {
  const int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
  if (row >= rows) return;
  const int last = row % tq + (cols - tq);  // last visible key
  const T *xr = x + (size_t)row * cols;
  T *yr = y + (size_t)row * cols;
  float m = -INFINITY;
  for (int j = lane; j <= last; j += 32) m = fmaxf(m, to_f(xr[j]) * scale);
  m = warp_max(m);
  float s = 0.0f;
  for (int j = lane; j <= last; j += 32) s += expf(to_f(xr[j]) * scale - m);
  const float inv = 1.0f / warp_sum(s);
  for (int j = lane; j < cols; j += 32)
    yr[j] = from_f<T>(j <= last ? expf(to_f(xr[j]) * scale - m) * inv : 0.0f);
}

template <typename T>
__device__ void causal_softmax_bwd(const T *y, const T *g, T *dx, int rows, int cols, float scale) {
  const int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
  if (row >= rows) return;
  const size_t off = (size_t)row * cols;
  float dot = 0.0f;
  for (int j = lane; j < cols; j += 32) dot += to_f(g[off + j]) * to_f(y[off + j]);
  dot = warp_sum(dot);
  for (int j = lane; j < cols; j += 32) {
    const float yj = to_f(y[off + j]);
    dx[off + j] = from_f<T>(scale * yj * (to_f(g[off + j]) - dot));
  }
}

// ---- the same, 4 consecutive entries per lane in registers (one read, one write of the
// row): tk a multiple of 4, at most 128 · SM_CHUNKS.
#define SM_CHUNKS 4
__device__ __forceinline__ void ld4(const float *p, float *o) {
  const float4 v = *reinterpret_cast<const float4 *>(p);
  o[0] = v.x, o[1] = v.y, o[2] = v.z, o[3] = v.w;
}
__device__ __forceinline__ void ld4(const bf16 *p, float *o) {
  const uint2 v = *reinterpret_cast<const uint2 *>(p);
  const bf16 *h = reinterpret_cast<const bf16 *>(&v);
  for (int i = 0; i < 4; i++) o[i] = to_f(h[i]);
}
__device__ __forceinline__ void st4(float *p, const float *o) {
  *reinterpret_cast<float4 *>(p) = make_float4(o[0], o[1], o[2], o[3]);
}
__device__ __forceinline__ void st4(bf16 *p, const float *o) {
  uint2 v;
  bf16 *h = reinterpret_cast<bf16 *>(&v);
  for (int i = 0; i < 4; i++) h[i] = from_f<bf16>(o[i]);
  *reinterpret_cast<uint2 *>(p) = v;
}

template <typename T>
__device__ void causal_softmax_fwd_v(const T *x, T *y, int rows, int cols, int tq, float scale) {
  const int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
  if (row >= rows) return;
  const int last = row % tq + (cols - tq);
  const T *xr = x + (size_t)row * cols;
  T *yr = y + (size_t)row * cols;
  float v[SM_CHUNKS][4];
  float m = -INFINITY;
#pragma unroll
  for (int c = 0; c < SM_CHUNKS; c++) {
    const int j0 = (c * 32 + lane) * 4;
    if (j0 < cols && j0 <= last) {
      ld4(xr + j0, v[c]);
      for (int i = 0; i < 4; i++) {
        v[c][i] = j0 + i <= last ? v[c][i] * scale : -INFINITY;
        m = fmaxf(m, v[c][i]);
      }
    }
  }
  m = warp_max(m);
  float s = 0.0f;
#pragma unroll
  for (int c = 0; c < SM_CHUNKS; c++) {
    const int j0 = (c * 32 + lane) * 4;
    for (int i = 0; i < 4; i++) {
      v[c][i] = (j0 < cols && j0 + i <= last) ? expf(v[c][i] - m) : 0.0f;
      s += v[c][i];
    }
  }
  const float inv = 1.0f / warp_sum(s);
#pragma unroll
  for (int c = 0; c < SM_CHUNKS; c++) {
    const int j0 = (c * 32 + lane) * 4;
    if (j0 < cols) {
      for (int i = 0; i < 4; i++) v[c][i] *= inv;
      st4(yr + j0, v[c]);
    }
  }
}

template <typename T>
__device__ void causal_softmax_bwd_v(const T *y, const T *g, T *dx, int rows, int cols, float scale) {
  const int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
  if (row >= rows) return;
  const size_t off = (size_t)row * cols;
  float yv[SM_CHUNKS][4], gv[SM_CHUNKS][4];
  float dot = 0.0f;
#pragma unroll
  for (int c = 0; c < SM_CHUNKS; c++) {
    const int j0 = (c * 32 + lane) * 4;
    if (j0 < cols) {
      ld4(y + off + j0, yv[c]);
      ld4(g + off + j0, gv[c]);
      for (int i = 0; i < 4; i++) dot += gv[c][i] * yv[c][i];
    }
  }
  dot = warp_sum(dot);
#pragma unroll
  for (int c = 0; c < SM_CHUNKS; c++) {
    const int j0 = (c * 32 + lane) * 4;
    if (j0 < cols) {
      for (int i = 0; i < 4; i++) yv[c][i] = scale * yv[c][i] * (gv[c][i] - dot);
      st4(dx + off + j0, yv[c]);
    }
  }
}

// ---- RoPE on interleaved pairs: one thread per pair ----------------------------------
template <typename T>
__device__ void rope(const T *x, const float *cos_t, const float *sin_t, T *y, int pairs, int half,
                     int t, float sign) {
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= pairs) return;
  const int i = p % half, pos = (p / half) % t;
  const float c = cos_t[pos * half + i], s = sign * sin_t[pos * half + i];
  const float a = to_f(x[2 * (size_t)p]), b = to_f(x[2 * (size_t)p + 1]);
  y[2 * (size_t)p] = from_f<T>(a * c - b * s);
  y[2 * (size_t)p + 1] = from_f<T>(a * s + b * c);
}

// ---- q, k, v from the qkv GEMM's rows, q and k roped: one thread per pair -------------------
// split: qkv (rows = b·t, 3, h, e) → out (3, b, h, t, e), q and k rotated by +angle, v copied;
// merge (its backward): dq, dk, dv (b, h, t, e) → dqkv (rows, 3, h, e), q and k rotated back.
// The rotation is rope's (same arithmetic, so the same bits as rope + a copy).
// One pair x[0..2] → y[0..2], rotated by the angle with cosine c and sine s (rope's
// arithmetic) when `rotate`, else copied.
template <typename T>
__device__ __forceinline__ void rotate_pair(const T *x, T *y, bool rotate, float c, float s) {
  const float a = to_f(x[0]), b = to_f(x[1]);
  y[0] = from_f<T>(rotate ? a * c - b * s : a);
  y[1] = from_f<T>(rotate ? a * s + b * c : b);
}

template <typename T>
__device__ void qkv_rope_split(const T *qkv, const float *cos_t, const float *sin_t, T *out, int rows,
                               int t, int h, int e) {
  const int half = e / 2, nb = rows / t;
  const size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= (size_t)3 * rows * h * half) return;
  const int i = p % half;
  size_t r = p / half;
  const int ti = r % t;
  r /= t;
  const int hi = r % h;
  r /= h;
  const int bi = r % nb, which = r / nb;
  const size_t src = (((size_t)(bi * t + ti) * 3 + which) * h + hi) * e + 2 * i;
  rotate_pair(qkv + src, out + 2 * p, which < 2, cos_t[ti * half + i], sin_t[ti * half + i]);
}

template <typename T>
__device__ void qkv_rope_merge(const T *dq, const T *dk, const T *dv, const float *cos_t,
                               const float *sin_t, T *out, int rows, int t, int h, int e) {
  const int half = e / 2;
  const size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= (size_t)3 * rows * h * half) return;
  const int i = p % half;
  size_t r = p / half;
  const int hi = r % h;
  r /= h;
  const int which = r % 3, row = r / 3;
  const int bi = row / t, ti = row % t;
  const T *g = which == 0 ? dq : (which == 1 ? dk : dv);
  const size_t src = (((size_t)bi * h + hi) * t + ti) * e + 2 * i;
  rotate_pair(g + src, out + 2 * p, which < 2, cos_t[ti * half + i], -sin_t[ti * half + i]);
}

// The same two kernels moving 16 bytes per thread (V = 16 / sizeof(T) elements, V / 2
// pairs): used when e is a multiple of V and every buffer starts 16-byte aligned (the
// launcher checks); the same arithmetic per pair.
template <typename T>
__device__ __forceinline__ uint4 rotate_chunk(const uint4 in, bool rotate, const float *c,
                                              const float *s, float sign) {
  constexpr int P = 8 / sizeof(T);
  uint4 out;
  const T *x = reinterpret_cast<const T *>(&in);
  T *y = reinterpret_cast<T *>(&out);
#pragma unroll
  for (int k = 0; k < P; k++) rotate_pair(x + 2 * k, y + 2 * k, rotate, c[k], sign * s[k]);
  return out;
}

template <typename T>
__device__ void qkv_rope_split_v(const T *qkv, const float *cos_t, const float *sin_t, T *out,
                                 int rows, int t, int h, int e) {
  constexpr int V = 16 / sizeof(T), P = V / 2;
  const int half = e / 2, cpr = half / P, nb = rows / t;
  const size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= (size_t)3 * rows * h * cpr) return;
  const int c = p % cpr;
  size_t r = p / cpr;
  const int ti = r % t;
  r /= t;
  const int hi = r % h;
  r /= h;
  const int bi = r % nb, which = r / nb;
  const size_t src = (((size_t)(bi * t + ti) * 3 + which) * h + hi) * e + (size_t)c * V;
  const int tab = ti * half + c * P;
  reinterpret_cast<uint4 *>(out)[p] = rotate_chunk<T>(
      *reinterpret_cast<const uint4 *>(qkv + src), which < 2, cos_t + tab, sin_t + tab, 1.0f);
}

template <typename T>
__device__ void qkv_rope_merge_v(const T *dq, const T *dk, const T *dv, const float *cos_t,
                                 const float *sin_t, T *out, int rows, int t, int h, int e) {
  constexpr int V = 16 / sizeof(T), P = V / 2;
  const int half = e / 2, cpr = half / P;
  const size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= (size_t)3 * rows * h * cpr) return;
  const int c = p % cpr;
  size_t r = p / cpr;
  const int hi = r % h;
  r /= h;
  const int which = r % 3, row = r / 3;
  const int bi = row / t, ti = row % t;
  const T *g = which == 0 ? dq : (which == 1 ? dk : dv);
  const size_t src = (((size_t)bi * h + hi) * t + ti) * e + (size_t)c * V;
  const int tab = ti * half + c * P;
  reinterpret_cast<uint4 *>(out)[p] = rotate_chunk<T>(
      *reinterpret_cast<const uint4 *>(g + src), which < 2, cos_t + tab, sin_t + tab, -1.0f);
}

// ---- SwiGLU activation ----------------------------------------------------------------
// SwiGLU's element-wise part, 16 bytes per thread per iteration where a, b and the output
// are 16-byte aligned (one element at a time otherwise, and for the tail): the same
// arithmetic per element either way.
__device__ __forceinline__ bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }
__device__ __forceinline__ float silu_mul1(float av, float bv) {
  return av / (1.0f + expf(-av)) * bv;
}
__device__ __forceinline__ float2 silu_mul1_bwd(float av, float bv, float gv) {
  const float sg = 1.0f / (1.0f + expf(-av));
  return make_float2(gv * bv * sg * (1.0f + av * (1.0f - sg)), gv * av * sg);
}

template <typename T> __device__ void silu_mul_fwd(const T *a, const T *b, T *y, int n) {
  constexpr int V = 16 / sizeof(T);
  const int nv = (aligned16(a) && aligned16(b) && aligned16(y)) ? n / V : 0;
  const int first = blockIdx.x * blockDim.x + threadIdx.x, stride = blockDim.x * gridDim.x;
  for (int i = first; i < nv; i += stride) {
    const uint4 ra = reinterpret_cast<const uint4 *>(a)[i], rb = reinterpret_cast<const uint4 *>(b)[i];
    uint4 ry;
    const T *ta = reinterpret_cast<const T *>(&ra), *tb = reinterpret_cast<const T *>(&rb);
    T *ty = reinterpret_cast<T *>(&ry);
#pragma unroll
    for (int k = 0; k < V; k++) ty[k] = from_f<T>(silu_mul1(to_f(ta[k]), to_f(tb[k])));
    reinterpret_cast<uint4 *>(y)[i] = ry;
  }
  for (int i = nv * V + first; i < n; i += stride) y[i] = from_f<T>(silu_mul1(to_f(a[i]), to_f(b[i])));
}

template <typename T> __device__ void silu_mul_bwd(const T *a, const T *b, const T *g, T *out, int n) {
  constexpr int V = 16 / sizeof(T);
  T *da = out, *db = out + n;
  const bool vec = aligned16(a) && aligned16(b) && aligned16(g) && aligned16(da) && aligned16(db);
  const int nv = vec ? n / V : 0;
  const int first = blockIdx.x * blockDim.x + threadIdx.x, stride = blockDim.x * gridDim.x;
  for (int i = first; i < nv; i += stride) {
    const uint4 ra = reinterpret_cast<const uint4 *>(a)[i], rb = reinterpret_cast<const uint4 *>(b)[i],
                rg = reinterpret_cast<const uint4 *>(g)[i];
    uint4 rda, rdb;
    const T *ta = reinterpret_cast<const T *>(&ra), *tb = reinterpret_cast<const T *>(&rb),
            *tg = reinterpret_cast<const T *>(&rg);
    T *tda = reinterpret_cast<T *>(&rda), *tdb = reinterpret_cast<T *>(&rdb);
#pragma unroll
    for (int k = 0; k < V; k++) {
      const float2 d = silu_mul1_bwd(to_f(ta[k]), to_f(tb[k]), to_f(tg[k]));
      tda[k] = from_f<T>(d.x);
      tdb[k] = from_f<T>(d.y);
    }
    reinterpret_cast<uint4 *>(da)[i] = rda;
    reinterpret_cast<uint4 *>(db)[i] = rdb;
  }
  for (int i = nv * V + first; i < n; i += stride) {
    const float2 d = silu_mul1_bwd(to_f(a[i]), to_f(b[i]), to_f(g[i]));
    da[i] = from_f<T>(d.x);
    db[i] = from_f<T>(d.y);
  }
}

// ---- cross-entropy: one block per row; logits f32 or bf16 (read as they are, computed in
// f32), ∂logits in the logits' dtype ---------------------------------------------------
template <typename T> __device__ float row_lse(const T *l, int cols, float *shared) {
  float m = -INFINITY;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, to_f(l[j]));
  m = block_reduce<true>(m, shared);
  float s = 0.0f;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) s += expf(to_f(l[j]) - m);
  return m + logf(block_reduce<false>(s, shared));
}

template <typename T>
__device__ void xent_fwd(const T *l, const uint32_t *tg, float *loss, int cols) {
  __shared__ float shared[32];
  const T *lr = l + (size_t)blockIdx.x * cols;
  const float lse = row_lse(lr, cols, shared);
  const uint32_t t = tg[blockIdx.x];  // out of range → NaN, never an out-of-bounds read
  if (threadIdx.x == 0) loss[blockIdx.x] = t < (uint32_t)cols ? lse - to_f(lr[t]) : NAN;
}

template <typename T>
__device__ void xent_bwd(const T *l, const uint32_t *tg, const float *g, T *dl, int cols) {
  __shared__ float shared[32];
  const size_t off = (size_t)blockIdx.x * cols;
  const float lse = row_lse(l + off, cols, shared), gr = g[blockIdx.x];
  const int t = tg[blockIdx.x];
  for (int j = threadIdx.x; j < cols; j += blockDim.x)
    dl[off + j] = from_f<T>(gr * (expf(to_f(l[off + j]) - lse) - (j == t ? 1.0f : 0.0f)));
}

// ---- RMSNorm for bf16 (f32 statistics): one block per row -----------------------------
template <typename T> __device__ void rmsnorm_fwd(const T *x, const T *w, T *y, int cols, float eps) {
  __shared__ float shared[32];
  const size_t off = (size_t)blockIdx.x * cols;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) ss += to_f(x[off + i]) * to_f(x[off + i]);
  const float r = rsqrtf(block_reduce<false>(ss, shared) / cols + eps);
  for (int i = threadIdx.x; i < cols; i += blockDim.x)
    y[off + i] = from_f<T>(to_f(x[off + i]) * r * to_f(w[i]));
}

template <typename T>
__device__ void rmsnorm_dx(const T *x, const T *w, const T *g, T *dx, int cols, float eps) {
  __shared__ float shared[32];
  const size_t off = (size_t)blockIdx.x * cols;
  float ss = 0.0f, dot = 0.0f;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) {
    const float xi = to_f(x[off + i]);
    ss += xi * xi;
    dot += to_f(g[off + i]) * to_f(w[i]) * xi;
  }
  const float r = rsqrtf(block_reduce<false>(ss, shared) / cols + eps);
  const float r3m = r * r * r * block_reduce<false>(dot, shared) / cols;
  for (int i = threadIdx.x; i < cols; i += blockDim.x)
    dx[off + i] = from_f<T>(r * to_f(g[off + i]) * to_f(w[i]) - to_f(x[off + i]) * r3m);
}

// ∂w partial sums: block b sums g ⊙ x ⊙ r over rows [b·R, min((b+1)·R, rows)) (r = the row's
// inverse RMS, f32) into part[b, :]; the caller sums the partials over b (deterministic).
template <typename T>
__device__ void rmsnorm_dw_part(const T *x, const T *g, float *part, int rows, int cols, int R,
                                float eps) {
  __shared__ float shared[32];
  __shared__ float rs[32];
  const int r0 = blockIdx.x * R, r1 = min(r0 + R, rows);
  for (int i = r0; i < r1; i++) {
    const size_t off = (size_t)i * cols;
    float ss = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) ss += to_f(x[off + j]) * to_f(x[off + j]);
    const float tot = block_reduce<false>(ss, shared);
    if (threadIdx.x == 0) rs[i - r0] = rsqrtf(tot / cols + eps);
  }
  __syncthreads();
  for (int j = threadIdx.x; j < cols; j += blockDim.x) {
    float acc = 0.0f;
    for (int i = r0; i < r1; i++) {
      const size_t k = (size_t)i * cols + j;
      acc += to_f(g[k]) * to_f(x[k]) * rs[i - r0];
    }
    part[(size_t)blockIdx.x * cols + j] = acc;
  }
}

// f32 → bf16, four elements per thread (x 16-byte aligned), then the n % 4 left one by one;
// round to nearest even, as candle's cast.
extern "C" __global__ void cast_f32_bf16_x4(const float *x, bf16 *y, int n, int, int, float) {
  const int n4 = n / 4, stride = blockDim.x * gridDim.x;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
    const float4 v = reinterpret_cast<const float4 *>(x)[i];
    __nv_bfloat162 a = __floats2bfloat162_rn(v.x, v.y), b = __floats2bfloat162_rn(v.z, v.w);
    uint2 out;
    out.x = *reinterpret_cast<uint32_t *>(&a);
    out.y = *reinterpret_cast<uint32_t *>(&b);
    reinterpret_cast<uint2 *>(y)[i] = out;
  }
  for (int i = 4 * n4 + blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = __float2bfloat16(x[i]);
}

// ---- RMSNorm backward in two kernels with many blocks each (a block that walks several
// rows with block-wide reductions in between is latency-bound at these sizes):
// rmsnorm_dx_rs: one block per row; each thread keeps its columns j = tid + k·blockDim
// (k < RB_MAXC) in registers; writes ∂x (plus `res`, the residual branch's gradient, when
// ADD) and the row's inverse RMS to rs[row].
// rmsnorm_dw_rs: block b sums g ⊙ x ⊙ rs over R rows for 256 columns: b = rowchunk · nc +
// colchunk (nc = ⌈cols / 256⌉), partial sums to part[rowchunk, :]; the caller adds the
// partials (deterministic).
#define RB_MAXC 16
template <typename T, bool ADD>
__device__ void rmsnorm_dx_rs(const T *x, const T *w, const T *g, const T *res, T *dx, float *rs,
                              int cols, float eps) {
  __shared__ float shared[32];
  const size_t off = (size_t)blockIdx.x * cols;
  float xv[RB_MAXC], gw[RB_MAXC], ss = 0.0f, dot = 0.0f;
#pragma unroll
  for (int k = 0; k < RB_MAXC; k++) {
    const int j = threadIdx.x + k * blockDim.x;
    xv[k] = j < cols ? to_f(x[off + j]) : 0.0f;
    gw[k] = j < cols ? to_f(g[off + j]) * to_f(w[j]) : 0.0f;
    ss += xv[k] * xv[k];
    dot += gw[k] * xv[k];
  }
  const float r = rsqrtf(block_reduce<false>(ss, shared) / cols + eps);
  const float r3m = r * r * r * block_reduce<false>(dot, shared) / cols;
#pragma unroll
  for (int k = 0; k < RB_MAXC; k++) {
    const int j = threadIdx.x + k * blockDim.x;
    if (j < cols) {
      float d = r * gw[k] - xv[k] * r3m;
      if (ADD) d += to_f(res[off + j]);
      dx[off + j] = from_f<T>(d);
    }
  }
  if (threadIdx.x == 0) rs[blockIdx.x] = r;
}

template <typename T>
__device__ void rmsnorm_dw_rs(const T *x, const T *g, const float *rs, float *part, int rows,
                              int cols, int R) {
  const int nc = (cols + 255) / 256, chunk = blockIdx.x / nc;
  const int j = (blockIdx.x % nc) * 256 + threadIdx.x;
  if (j >= cols) return;
  const int r0 = chunk * R, r1 = min(r0 + R, rows);
  float acc = 0.0f;
  for (int i = r0; i < r1; i++) {
    const size_t k = (size_t)i * cols + j;
    acc += to_f(g[k]) * to_f(x[k]) * rs[i];
  }
  part[(size_t)chunk * cols + j] = acc;
}

// ---- y = a + b on 16-byte chunks (8 bf16 or 4 f32), the tail one element at a time.
__device__ __forceinline__ void add_chunk(const uint4 &a, const uint4 &b, uint4 &y, float) {
  const float *fa = reinterpret_cast<const float *>(&a), *fb = reinterpret_cast<const float *>(&b);
  float *fy = reinterpret_cast<float *>(&y);
#pragma unroll
  for (int i = 0; i < 4; i++) fy[i] = fa[i] + fb[i];
}
__device__ __forceinline__ void add_chunk(const uint4 &a, const uint4 &b, uint4 &y, bf16) {
  const __nv_bfloat162 *ha = reinterpret_cast<const __nv_bfloat162 *>(&a);
  const __nv_bfloat162 *hb = reinterpret_cast<const __nv_bfloat162 *>(&b);
  __nv_bfloat162 *hy = reinterpret_cast<__nv_bfloat162 *>(&y);
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const float2 fa = __bfloat1622float2(ha[i]), fb = __bfloat1622float2(hb[i]);
    hy[i] = __floats2bfloat162_rn(fa.x + fb.x, fa.y + fb.y);
  }
}
template <typename T> __device__ void add(const T *a, const T *b, T *y, int n) {
  constexpr int V = 16 / sizeof(T);
  const int nv = n / V, stride = blockDim.x * gridDim.x;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < nv; i += stride) {
    uint4 out;
    add_chunk(reinterpret_cast<const uint4 *>(a)[i], reinterpret_cast<const uint4 *>(b)[i], out, T());
    reinterpret_cast<uint4 *>(y)[i] = out;
  }
  for (int i = V * nv + blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = from_f<T>(to_f(a[i]) + to_f(b[i]));
}

// ---- (A, B, C, E) → (A, C, B, E), moving 16-byte chunks (ev chunks per E row).
__device__ void swap12(const uint4 *x, uint4 *y, int A, int B, int C, int ev) {
  const size_t n = (size_t)A * B * C * ev, stride = (size_t)blockDim.x * gridDim.x;
  for (size_t o = blockIdx.x * (size_t)blockDim.x + threadIdx.x; o < n; o += stride) {
    const int e = o % ev;
    size_t rest = o / ev;
    const int b = rest % B;
    rest /= B;
    const int c = rest % C;
    const size_t a = rest / C;
    y[o] = x[((a * B + b) * C + c) * ev + e];
  }
}

// ---- 2-D transpose (rows, cols) → (cols, rows) through 32 × 33 shared tiles, blocks of
// 256 threads (8 rows of 32), tiles taken grid-stride.
template <typename T>
__device__ void transpose2d(const T *x, T *y, int rows, int cols) {
  __shared__ T tile[32][33];
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const int tr = (rows + 31) / 32, tc = (cols + 31) / 32;
  for (int t = blockIdx.x; t < tr * tc; t += gridDim.x) {
    const int r0 = (t / tc) * 32, c0 = (t % tc) * 32;
    for (int i = ty; i < 32; i += 8)
      if (r0 + i < rows && c0 + tx < cols) tile[i][tx] = x[(size_t)(r0 + i) * cols + c0 + tx];
    __syncthreads();
    for (int i = ty; i < 32; i += 8)
      if (c0 + i < cols && r0 + tx < rows) y[(size_t)(c0 + i) * rows + r0 + tx] = tile[tx][i];
    __syncthreads();
  }
}

// ---- token embedding: forward gathers f32 table rows into T; backward, one block per
// vocabulary row v: warp 0 lists (in token order) the tokens whose id is v, then every
// thread sums those tokens' gradient rows for its columns (deterministic).
#define EMBED_MAX 4096
template <typename T>
__device__ void embed_fwd(const float *w, const uint32_t *ids, T *y, int n, int d) {
  const size_t total = (size_t)n * d, stride = (size_t)blockDim.x * gridDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += stride)
    y[i] = from_f<T>(w[(size_t)ids[i / d] * d + i % d]);
}

template <typename T>
__device__ void embed_bwd(const T *g, const uint32_t *ids, float *dw, int n, int d) {
  __shared__ int list[EMBED_MAX];
  __shared__ int count;
  const unsigned v = blockIdx.x;
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    int c = 0;
    for (int base = 0; base < n; base += 32) {
      const int r = base + lane;
      const bool m = r < n && ids[r] == v;
      const unsigned mask = __ballot_sync(0xffffffffu, m);
      if (m) list[c + __popc(mask & ((1u << lane) - 1u))] = r;
      c += __popc(mask);
    }
    if (lane == 0) count = c;
  }
  __syncthreads();
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    float acc = 0.0f;
    for (int k = 0; k < count; k++) acc += to_f(g[(size_t)list[k] * d + j]);
    dw[(size_t)v * d + j] = acc;
  }
}

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

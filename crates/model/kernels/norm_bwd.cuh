// The RMSNorm backward in two many-block kernels (∂x with each row's inverse RMS, then ∂w
// partial sums from them). Part of fused.cu (see its header for the kernels' arguments).
#pragma once
#include "common.cuh"

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

// ---- The RMSNorm backward in one kernel (16 bytes per lane and load; cols % (16 / sizeof(T))
// == 0): one warp per row; warp w of block b takes rows (b·rpw + i)·W + w for i < rpw (W =
// the block's warps). ∂x (+ res when ADD) as rmsnorm_dx_rs; each warp adds
// g ⊙ x ⊙ r of its rows into its own slice of the dynamic shared memory (W × cols f32;
// column v·V + k at k·nv + v, so a warp's lanes hit consecutive banks), and the block writes
// the sum of its warps' slices, in warp order, to part[b, :]. The caller sums the partials
// over b: deterministic, no atomics.
template <typename T, bool ADD>
__device__ void rmsnorm_bwd_v(const T *__restrict__ x, const T *__restrict__ w,
                              const T *__restrict__ g, const T *__restrict__ res,
                              T *__restrict__ dx, float *__restrict__ part, int rows, int cols,
                              int rpw, float eps) {
  extern __shared__ float acc[];
  constexpr int V = 16 / sizeof(T);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, W = blockDim.x >> 5, nv = cols / V;
  float *my = acc + (size_t)warp * cols;
  for (int i = lane; i < cols; i += 32) my[i] = 0.0f;
  __syncwarp();
  for (int i = 0; i < rpw; i++) {
    const int row = (blockIdx.x * rpw + i) * W + warp;
    if (row >= rows) break;
    const size_t off = (size_t)row * cols;
    float ss = 0.0f, dot = 0.0f;
    // Unrolled, with the pointers restrict: four chunks' loads in flight a lane (∂w's shared
    // slices bound the warps on an SM).
#pragma unroll 4
    for (int v = lane; v < nv; v += 32) {
      float xf[V], gf[V], wf[V];
      load16(x + off + v * V, xf);
      load16(g + off + v * V, gf);
      load16(w + v * V, wf);
#pragma unroll
      for (int k = 0; k < V; k++) {
        ss += xf[k] * xf[k];
        dot += gf[k] * wf[k] * xf[k];
      }
    }
    const float r = rsqrtf(warp_sum(ss) / cols + eps);
    const float r3m = r * r * r * warp_sum(dot) / cols;
#pragma unroll 2
    for (int v = lane; v < nv; v += 32) {
      float xf[V], gf[V], wf[V], d[V];
      load16(x + off + v * V, xf);
      load16(g + off + v * V, gf);
      load16(w + v * V, wf);
      if (ADD) load16(res + off + v * V, d);
#pragma unroll
      for (int k = 0; k < V; k++) {
        const float t = r * (gf[k] * wf[k]) - xf[k] * r3m;
        d[k] = ADD ? d[k] + t : t;
        my[k * nv + v] += gf[k] * xf[k] * r;
      }
      store16(dx + off + v * V, d);
    }
  }
  __syncthreads();
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const int v = c / V, k = c % V;
    float s = 0.0f;
    for (int q = 0; q < W; q++) s += acc[(size_t)q * cols + k * nv + v];
    part[(size_t)blockIdx.x * cols + c] = s;
  }
}

// ---- The RMSNorm backward for wide rows (cols ≤ 128 · C · V, V = 16 / sizeof(T)), where
// rmsnorm_bwd_v's ∂w slices (a warp's cols f32 in shared memory) leave few warps an SM: a
// block of four warps walks rows r0 .. r0 + rpb, thread t holding chunks t + 128 k (k < C)
// of each row (x and g as loaded, w for all rows) and its columns' ∂w sums in registers.
// Per row: ss and g·w·x summed over the block (each warp's sum, then the four in warp
// order, through a shared pair kept per row parity, so one barrier a row), then ∂x (+ res)
// as rmsnorm_bwd_v's. The block writes its sums to part[b, :]; the caller sums the partials
// over b (deterministic, no atomics).
#define RW_C 5  // chunks a thread: bf16 rows up to 5,120 columns (the 13B's)
template <typename T, bool ADD, int C>
__device__ void rmsnorm_bwd_w(const T *__restrict__ x, const T *__restrict__ w,
                              const T *__restrict__ g, const T *__restrict__ res,
                              T *__restrict__ dx, float *__restrict__ part, int rows, int cols,
                              int rpb, float eps) {
  constexpr int V = 16 / sizeof(T);
  __shared__ float red[2][4][2];
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5, nv = cols / V;
  uint4 wr[C], xr[C], gr[C];
  float acc[C][V];
#pragma unroll
  for (int k = 0; k < C; k++) {
    if (t + 128 * k < nv) wr[k] = reinterpret_cast<const uint4 *>(w)[t + 128 * k];
#pragma unroll
    for (int u = 0; u < V; u++) acc[k][u] = 0.0f;
  }
  const int r0 = blockIdx.x * rpb, r1 = min(r0 + rpb, rows);
  for (int row = r0; row < r1; row++) {
    const uint4 *xrow = reinterpret_cast<const uint4 *>(x + (size_t)row * cols);
    const uint4 *grow = reinterpret_cast<const uint4 *>(g + (size_t)row * cols);
    float ss = 0.0f, dot = 0.0f;
#pragma unroll
    for (int k = 0; k < C; k++)
      if (t + 128 * k < nv) {
        xr[k] = xrow[t + 128 * k];
        gr[k] = grow[t + 128 * k];
      }
#pragma unroll
    for (int k = 0; k < C; k++)
      if (t + 128 * k < nv) {
        const T *xt = reinterpret_cast<const T *>(&xr[k]), *gt = reinterpret_cast<const T *>(&gr[k]),
                *wt = reinterpret_cast<const T *>(&wr[k]);
#pragma unroll
        for (int u = 0; u < V; u++) {
          const float xf = to_f(xt[u]);
          ss += xf * xf;
          dot += to_f(gt[u]) * to_f(wt[u]) * xf;
        }
      }
    ss = warp_sum(ss);
    dot = warp_sum(dot);
    const int b = (row - r0) & 1;
    if (lane == 0) {
      red[b][warp][0] = ss;
      red[b][warp][1] = dot;
    }
    __syncthreads();
    ss = ((red[b][0][0] + red[b][1][0]) + red[b][2][0]) + red[b][3][0];
    dot = ((red[b][0][1] + red[b][1][1]) + red[b][2][1]) + red[b][3][1];
    const float r = rsqrtf(ss / cols + eps);
    const float r3m = r * r * r * dot / cols;
#pragma unroll
    for (int k = 0; k < C; k++) {
      const int v = t + 128 * k;
      if (v >= nv) continue;
      const T *xt = reinterpret_cast<const T *>(&xr[k]), *gt = reinterpret_cast<const T *>(&gr[k]),
              *wt = reinterpret_cast<const T *>(&wr[k]);
      float d[V];
      if (ADD) load16(res + (size_t)row * cols + v * V, d);
#pragma unroll
      for (int u = 0; u < V; u++) {
        const float xf = to_f(xt[u]), gf = to_f(gt[u]);
        const float tt = r * (gf * to_f(wt[u])) - xf * r3m;
        d[u] = ADD ? d[u] + tt : tt;
        acc[k][u] += gf * xf * r;
      }
      store16(dx + (size_t)row * cols + v * V, d);
    }
  }
#pragma unroll
  for (int k = 0; k < C; k++)
    if (t + 128 * k < nv) {
      float4 *out = reinterpret_cast<float4 *>(part + (size_t)blockIdx.x * cols + (t + 128 * k) * V);
#pragma unroll
      for (int q = 0; q < V / 4; q++)
        out[q] = make_float4(acc[k][4 * q], acc[k][4 * q + 1], acc[k][4 * q + 2], acc[k][4 * q + 3]);
    }
}

// ---- Column sums of an f32 (rows, cols) matrix, 32 columns per block of 256 threads: each
// of 8 row lanes sums every 8th row, then lane 0 adds the 8 sums in order (deterministic).
__device__ void colsum_f32(const float *x, float *y, int rows, int cols) {
  __shared__ float part[8][33];
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5, c = blockIdx.x * 32 + tx;
  float acc = 0.0f;
  if (c < cols)
    for (int r = ty; r < rows; r += 8) acc += x[(size_t)r * cols + c];
  part[ty][tx] = acc;
  __syncthreads();
  if (ty == 0 && c < cols) {
    float s = 0.0f;
    for (int k = 0; k < 8; k++) s += part[k][tx];
    y[c] = s;
  }
}

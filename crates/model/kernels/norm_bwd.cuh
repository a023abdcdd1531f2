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
    // Unrolled, with the pointers restrict: four chunks' loads in flight a lane (at 4,096
    // columns a block holds three warps: ∂w's shared slices bound the warps on an SM).
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

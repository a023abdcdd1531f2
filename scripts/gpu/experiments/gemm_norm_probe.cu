// Probe (issue 33, session 11): can the clipping norm's read of the weight gradients be
// fused into the GEMMs that write them? For each weight-gradient GEMM of the LM's backward,
// dW (m × n, row-major, bf16) = gᵀ (m × k) · x (k × n), k = tokens (8 × 128), it times:
//   cuBLASLt  the best of its first 16 heuristic algorithms (as model::gemm tunes);
//   pass      the norm's separate pass over dW (sum of squares, f32, 16-byte loads; dW was
//             just written, so it reads from L2 where it fits);
//   plain     CUTLASS 3 sm90 GEMMs (the configurations in `runners`) storing dW only;
//   fused     the same GEMMs whose epilogue also sums the squares of the rounded bf16
//             outputs (TileSumsq: one slot per tile and consumer warp, no atomics), plus
//             the one-block sum of the slots.
// Results: docs/results/train-speed-h100x1.md, "Session 11". The fused sums did NOT match
// the pass (relative error 0.1-0.2 on most shapes): the fused times are of an unvalidated
// epilogue. The stream-K configuration (runner 5) hung. Neither changes the finding, which
// rests on the plain CUTLASS GEMMs against cuBLASLt plus the pass.
// Build here (the toolchain of `cargo xtask toolchain`; CUTLASS 4.2 headers from the
// nvidia-cutlass wheel, unpacked to $CUT):
//   nvcc -std=c++17 -O3 -DNDEBUG -arch=sm_90a --expt-relaxed-constexpr -I$CUT/include \
//        -I$CUT/tools/util/include -L$CUDA_ROOT/lib gemm_norm_probe.cu -lcublasLt \
//        -o .probe/gemm_norm_probe
// then copy gemm_norm_probe.sh to .probe/run.sh and run `bash .probe/run.sh` on the GPU.
// (-DNDEBUG matters: CUTLASS's device asserts serialize the wgmma pipeline.)
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cublasLt.h>

#include "cutlass/cutlass.h"
#include "cute/tensor.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp"
#include "cutlass/util/packed_stride.hpp"

using namespace cute;
using namespace cutlass::epilogue::fusion;
using bf16 = cutlass::bfloat16_t;
constexpr auto RN = cutlass::FloatRoundStyle::round_to_nearest;

#define CK(x) do { auto e_ = (x); if (e_ != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e_), __LINE__); exit(1);} } while (0)
#define LK(x) do { auto e_ = (x); if (e_ != CUBLAS_STATUS_SUCCESS) { printf("cuBLASLt %d at %d\n", (int)e_, __LINE__); exit(1);} } while (0)



// The sum of squares of a tile's outputs (as rounded for the store), deterministic: each
// consumer warp of each output tile writes its own slot, (tile_m * tiles_n + tile_n) * 8 +
// warp; nothing is added atomically. Slots no warp writes stay zero.
struct TileSumsq {
  struct SharedStorage {};
  struct Arguments { float* slots = nullptr; int tiles_n = 0; };
  using Params = Arguments;
  template <class P> static constexpr Params to_underlying_arguments(P const&, Arguments const& a, void*) { return a; }
  template <class P> static bool can_implement(P const&, Arguments const&) { return true; }
  template <class P> static size_t get_workspace_size(P const&, Arguments const&) { return 0; }
  template <class P> static cutlass::Status initialize_workspace(P const&, Arguments const&, void*, cudaStream_t,
      cutlass::CudaHostAdapter* = nullptr) { return cutlass::Status::kSuccess; }
  CUTLASS_DEVICE bool is_producer_load_needed() const { return false; }
  CUTLASS_DEVICE bool is_C_load_needed() const { return false; }
  CUTLASS_HOST_DEVICE TileSumsq() {}
  CUTLASS_HOST_DEVICE TileSumsq(Params const& p, SharedStorage const&) : params(p) {}
  Params params;
  template <class... Args> CUTLASS_DEVICE auto get_producer_load_callbacks(ProducerLoadArgs<Args...> const&) {
    return EmptyProducerLoadCallbacks{};
  }
  template <class CTensor, class ThrResidue>
  struct ConsumerStoreCallbacks : EmptyConsumerStoreCallbacks {
    CUTLASS_DEVICE ConsumerStoreCallbacks(CTensor c, ThrResidue r, float* slot) : tCc(c), residue(r), slot(slot) {}
    float acc = 0.f;
    CTensor tCc;
    ThrResidue residue;
    float* slot;
    template <typename EA, typename EI, int F>
    CUTLASS_DEVICE auto visit(cutlass::Array<EA, F> const&, int epi_v, int epi_m, int epi_n, cutlass::Array<EI, F> const& in) {
      Tensor c = tCc(_, _, _, epi_m, epi_n);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < F; ++i) {
        float x = float(in[i]);
        if (elem_less(c(epi_v * F + i), residue)) acc += x * x;
      }
      return in;
    }
    CUTLASS_DEVICE void end() {
      float s = acc;
      CUTLASS_PRAGMA_UNROLL
      for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
      if ((threadIdx.x & 31) == 0) *slot = s;
    }
  };
  template <bool ReferenceSrc, class... Args>
  CUTLASS_DEVICE auto get_consumer_store_callbacks(ConsumerStoreArgs<Args...> const& args) {
    auto [m, n, k, l] = args.tile_coord_mnkl;
    int warp = (args.thread_idx / 32) & 7;
    float* slot = params.slots + ((size_t)m * params.tiles_n + n) * 8 + warp;
    return ConsumerStoreCallbacks<decltype(args.tCcD), decltype(args.residue_tCcD)>(args.tCcD, args.residue_tCcD, slot);
  }
};

template <class Tile, class Cluster, class KSched, class ESched, bool Fused, class Sched = void>
struct Cfg {
  using LayoutA = cutlass::layout::ColumnMajor;  // gᵀ: g (k × m) row-major
  using LayoutB = cutlass::layout::RowMajor;     // x (k × n)
  using LayoutD = cutlass::layout::RowMajor;
  using Cast = Sm90EVT<Sm90Compute<cutlass::epilogue::thread::Identity, bf16, float, RN>, Sm90AccFetch>;
  using Red = TileSumsq;
  using Tree = std::conditional_t<Fused,
      Sm90EVT<Sm90Compute<cutlass::epilogue::thread::Identity, bf16, float, RN>, Sm90EVT<Red, Cast>>,
      Cast>;
  using Epi = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float,
      void, LayoutD, 8, bf16, LayoutD, 8, ESched, Tree>::CollectiveOp;
  using Main = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, bf16, LayoutA, 8, bf16, LayoutB, 8, float,
      Tile, Cluster,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epi::SharedStorage))>,
      KSched>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Main, Epi, Sched>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  static constexpr int TM = decltype(size<0>(Tile{}))::value;
  static constexpr int TN = decltype(size<1>(Tile{}))::value;
};

// The block's sum of s (valid in thread 0).
__device__ float block_sum(float s) {
  __shared__ float sh[32];
  for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(~0u, s, o);
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    s = threadIdx.x < blockDim.x / 32 ? sh[threadIdx.x] : 0.f;
    for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(~0u, s, o);
  }
  return s;
}
// One partial sum per block, one pass of 16-byte loads (as seam's gradnorm kernel).
__global__ void sumsq_bf16(const uint4* p, size_t n16, float* out) {
  float s = 0.f;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n16; i += (size_t)gridDim.x * blockDim.x) {
    uint4 v = p[i];
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
    for (int j = 0; j < 4; ++j) { float2 f = __bfloat1622float2(h[j]); s += f.x * f.x + f.y * f.y; }
  }
  s = block_sum(s);
  if (threadIdx.x == 0) out[blockIdx.x] = s;
}
__global__ void sum_f32(const float* p, size_t n, float* out) {
  float s = 0.f;
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) s += p[i];
  s = block_sum(s);
  if (threadIdx.x == 0) *out = s;
}
__global__ void fill(bf16* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed; h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
    p[i] = bf16(((h & 0xffff) / 65536.f - 0.5f) * 0.1f);
  }
}

template <class F> float time_ms(F f, int reps = 30) {
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  for (int i = 0; i < 5; ++i) f();
  CK(cudaEventRecord(a));
  for (int i = 0; i < reps; ++i) f();
  CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
  float ms; CK(cudaEventElapsedTime(&ms, a, b));
  return ms / reps;
}

struct Buf { bf16 *g, *x, *d; float *part, *sum; size_t part_n; };
static int sms;
static void* ws; static size_t ws_size = 64 << 20;

template <class C> float run_cut(int m, int n, int k, Buf& b, float* sumsq_out, int swz = 1) {
  using Gemm = typename C::Gemm;
  using SA = typename Gemm::GemmKernel::StrideA; using SB = typename Gemm::GemmKernel::StrideB;
  using SD = typename Gemm::GemmKernel::StrideD;
  SA sa = cutlass::make_cute_packed_stride(SA{}, make_shape(m, k, 1));
  SB sb = cutlass::make_cute_packed_stride(SB{}, make_shape(n, k, 1));
  SD sd = cutlass::make_cute_packed_stride(SD{}, make_shape(m, n, 1));
  cutlass::KernelHardwareInfo hw; hw.device_id = 0; hw.sm_count = sms;
  typename Gemm::Arguments args;
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  args.problem_shape = {m, n, k, 1};
  args.mainloop = {b.g, sa, b.x, sb};
  args.epilogue.ptr_C = nullptr; args.epilogue.dC = sd;
  args.epilogue.ptr_D = b.d; args.epilogue.dD = sd;
  int tiles_n = (n + C::TN - 1) / C::TN;
  size_t parts = (size_t)((m + C::TM - 1) / C::TM) * tiles_n * 8;
  if constexpr (std::is_same_v<typename C::Tree, typename C::Cast>) {
    args.epilogue.thread = {};
  } else {
    if (parts > b.part_n) { printf("partials: %zu > %zu\n", parts, b.part_n); exit(1); }
    args.epilogue.thread = { { { {}, {} }, { b.part, tiles_n } }, {} };
    CK(cudaMemset(b.part, 0, parts * 4));
  }
  args.hw_info = hw;
  args.scheduler.max_swizzle_size = swz;
  Gemm gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess) { printf("cannot implement %d %d %d\n", m, n, k); return -1; }
  if (Gemm::get_workspace_size(args) > ws_size) { printf("workspace\n"); exit(1); }
  if (gemm.initialize(args, ws) != cutlass::Status::kSuccess) { printf("init failed\n"); exit(1); }
  bool fused = !std::is_same_v<typename C::Tree, typename C::Cast>;
  auto f = [&] {
    if (gemm.run() != cutlass::Status::kSuccess) { printf("run failed\n"); exit(1); }
    if (fused) sum_f32<<<1, 1024>>>(b.part, parts, b.sum);
  };
  float ms = time_ms(f);
  if (sumsq_out) { f(); CK(cudaMemcpy(sumsq_out, b.sum, 4, cudaMemcpyDeviceToHost)); }
  CK(cudaGetLastError());
  return ms;
}

float run_lt(cublasLtHandle_t lt, int m, int n, int k, Buf& b) {
  // Row-major D (m × n) is column-major Dᶜ (n × m) = x (col-major n × k) · g (col-major m × k)ᵀ.
  cublasLtMatmulDesc_t op; LK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t tn = CUBLAS_OP_N, tt = CUBLAS_OP_T;
  LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tn, sizeof tn));
  LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tt, sizeof tt));
  cublasLtMatrixLayout_t la, lb, ld;
  LK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, n, k, n));
  LK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, m, k, m));
  LK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, n, m, n));
  cublasLtMatmulPreference_t pref; LK(cublasLtMatmulPreferenceCreate(&pref));
  size_t wsz = 32 << 20;
  LK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsz, sizeof wsz));
  cublasLtMatmulHeuristicResult_t h[16]; int got = 0;
  LK(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 16, h, &got));
  float alpha = 1.f, beta = 0.f, best = 1e30f;
  for (int i = 0; i < got; ++i) {
    auto f = [&] { LK(cublasLtMatmul(lt, op, &alpha, b.x, la, b.g, lb, &beta, b.d, ld, b.d, ld, &h[i].algo, ws, wsz, 0)); };
    float t = time_ms(f, 20);
    if (t < best) best = t;
  }


  return best;
}

using Coop = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using CoopE = cutlass::epilogue::TmaWarpSpecializedCooperative;
using Ping = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
using PingE = cutlass::epilogue::TmaWarpSpecialized;
using SK = cutlass::gemm::StreamKScheduler;
#define CFG(name, T, C, K, E, S) {name, run_cut<Cfg<T, C, K, E, false, S>>, run_cut<Cfg<T, C, K, E, true, S>>}
using T128x256 = Shape<_128, _256, _64>; using T256x128 = Shape<_256, _128, _64>; using T128x128 = Shape<_128, _128, _64>;
using C21 = Shape<_2, _1, _1>; using C12 = Shape<_1, _2, _1>; using C11 = Shape<_1, _1, _1>;
struct Runner { const char* name; float (*plain)(int, int, int, Buf&, float*, int); float (*fused)(int, int, int, Buf&, float*, int); };
static Runner runners[] = {
  CFG("coop128x256c21", T128x256, C21, Coop, CoopE, void),
  CFG("coop256x128c21", T256x128, C21, Coop, CoopE, void),
  CFG("coop256x128c12", T256x128, C12, Coop, CoopE, void),
  CFG("ping128x128c21", T128x128, C21, Ping, PingE, void),
  CFG("ping128x128c12", T128x128, C12, Ping, PingE, void),
  CFG("coop256x128sk", T256x128, C21, Coop, CoopE, SK),
};
constexpr int NR = sizeof(runners) / sizeof(runners[0]);

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  int only = argc > 1 ? atoi(argv[1]) : -2;  // -1: cuBLASLt and the pass only; r: runner r only
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp pr; CK(cudaGetDeviceProperties(&pr, 0));
  printf("# %s, %d SMs\n", pr.name, sms);
  CK(cudaMalloc(&ws, ws_size));
  cublasLtHandle_t lt; LK(cublasLtCreate(&lt));
  // (model, name, m = out, n = in, k = tokens 8 × 128, per step)
  struct S { const char* model; const char* w; int m, n, k, per_model; } shapes[] = {
    {"xl", "wqkv", 4800, 1600, 1024, 48}, {"xl", "wo", 1600, 1600, 1024, 48},
    {"xl", "w1|w3", 6400, 1600, 1024, 96}, {"xl", "w2", 1600, 6400, 1024, 48},
    {"small", "wqkv", 2304, 768, 1024, 12}, {"small", "wo", 768, 768, 1024, 12},
    {"small", "w1|w3", 3072, 768, 1024, 24}, {"small", "w2", 768, 3072, 1024, 12},
  };
  size_t maxmn = 6400 * 1600, maxk = 1024;
  Buf b; b.part_n = 8 << 20;
  CK(cudaMalloc(&b.g, maxk * 6400 * 2)); CK(cudaMalloc(&b.x, maxk * 6400 * 2));
  CK(cudaMalloc(&b.d, maxmn * 2)); CK(cudaMalloc(&b.part, b.part_n * 4)); CK(cudaMalloc(&b.sum, 4096 * 4));
  fill<<<1024, 256>>>(b.g, maxk * 6400, 1); fill<<<1024, 256>>>(b.x, maxk * 6400, 2);
  double tot_lt[2] = {}, tot_pass[2] = {}, tot_plain[2][NR] = {}, tot_fused[2][NR] = {};
  for (auto& s : shapes) {
    int m = s.m, n = s.n, k = s.k, mi = s.model[0] == 'x' ? 0 : 1;
    float lt_ms = only < 0 ? run_lt(lt, m, n, k, b) : 0.f;
    size_t n16 = (size_t)m * n / 8;
    float pass_ms = time_ms([&] { sumsq_bf16<<<264, 512>>>((const uint4*)b.d, n16, b.sum); });
    auto pass_sum = [&] { sumsq_bf16<<<264, 512>>>((const uint4*)b.d, n16, b.sum); sum_f32<<<1, 1024>>>(b.sum, 264, b.sum + 1024);
                          float v; CK(cudaMemcpy(&v, b.sum + 1024, 4, cudaMemcpyDeviceToHost)); return v; };
    printf("%-5s %-5s m %d n %d k %d: cuBLASLt %.2f us, pass %.2f us\n", s.model, s.w, m, n, k, lt_ms * 1e3, pass_ms * 1e3);
    tot_lt[mi] += s.per_model * lt_ms; tot_pass[mi] += s.per_model * pass_ms;
    for (int r = 0; r < NR; ++r) {
      if (only != -2 && only != r) continue;
      float best_p = 1e30f, best_f = 1e30f, err = 0; int bs = 0;
      for (int swz : {1, 2, 4}) {
        float p = runners[r].plain(m, n, k, b, nullptr, swz);
        float fs; float f = runners[r].fused(m, n, k, b, &fs, swz);
        float want = pass_sum();
        err = fmaxf(err, fabsf(fs - want) / want);
        if (p > 0 && p < best_p) best_p = p;
        if (f > 0 && f < best_f) { best_f = f; bs = swz; }
      }
      tot_plain[mi][r] += s.per_model * best_p; tot_fused[mi][r] += s.per_model * best_f;
      printf("   %-16s plain %7.2f us  fused %7.2f us (swizzle %d)  rel err %.1e\n", runners[r].name, best_p * 1e3, best_f * 1e3, bs, err);
      printf("{\"probe\":\"gemm-norm\",\"model\":\"%s\",\"w\":\"%s\",\"m\":%d,\"n\":%d,\"k\":%d,\"lt_us\":%.3f,\"pass_us\":%.3f,"
             "\"cfg\":\"%s\",\"plain_us\":%.3f,\"fused_us\":%.3f,\"rel_err\":%.3e}\n", s.model, s.w, m, n, k,
             lt_ms * 1e3, pass_ms * 1e3, runners[r].name, best_p * 1e3, best_f * 1e3, err);
    }
  }
  for (int mi = 0; mi < 2; ++mi) {
    printf("per step, %s: cuBLASLt %.3f ms + pass %.3f ms = %.3f ms\n", mi ? "small" : "xl", tot_lt[mi], tot_pass[mi], tot_lt[mi] + tot_pass[mi]);
    for (int r = 0; r < NR; ++r) printf("   %-16s plain %.3f ms, fused %.3f ms\n", runners[r].name, tot_plain[mi][r], tot_fused[mi][r]);
  }
  return 0;
}

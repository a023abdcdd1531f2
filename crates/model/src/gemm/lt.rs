//! cuBLASLt for [`super::matmul`]: one handle and one 32 MiB workspace per stream, one
//! plan (descriptors and algorithm) per shape, the algorithm chosen once among cuBLASLt's
//! heuristic candidates (`super::tune`). The process keeps one choice per shape (the
//! candidate's index in cuBLASLt's list, `super::choices`), which every stream uses.
//!
//! Row-major D (m × n) = A (m × k) · B (k × n) is column-major Dᵀ = Bᵀ · Aᵀ, so cuBLASLt's
//! first operand is B's buffer and its second A's; a transposed view is the transpose op
//! on the contiguous matrix under it.

use super::Tuned;
use candle_core::cuda_backend::cudarc::cublaslt::{result as lt, sys};
use candle_core::cuda_backend::cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use candle_core::cuda_backend::WrapErr;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, OnceLock};

pub(super) const WORKSPACE: usize = 32 << 20;

/// A GEMM's shape, operand layouts and arithmetic: one plan each.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Key {
    pub(super) m: usize,
    pub(super) n: usize,
    pub(super) k: usize,
    /// A and B transposed views.
    pub(super) ta: bool,
    pub(super) tb: bool,
    pub(super) bf16: bool,
    pub(super) tf32: bool,
    pub(super) add: bool,
    /// C and D f32 where A and B are bf16 (a weight gradient summed in f32).
    pub(super) out_f32: bool,
    /// cuBLASLt's SM count target (`seam::gemm_sms::sm_target`; 0: every SM).
    pub(super) sms: u32,
}

pub(super) struct Plan {
    pub(super) desc: sys::cublasLtMatmulDesc_t,
    pub(super) p: sys::cublasLtMatrixLayout_t,
    pub(super) q: sys::cublasLtMatrixLayout_t,
    pub(super) d: sys::cublasLtMatrixLayout_t,
    pub(super) algo: sys::cublasLtMatmulAlgo_t,
    pub(super) tuned: Tuned,
}

/// One stream's handle, workspace and plans (kept for the process).
pub(super) struct Stream {
    pub(super) handle: sys::cublasLtHandle_t,
    workspace: CudaSlice<u8>,
    /// Where a GEMM queued during a capture is captured first (`seam::graph::splice`).
    side: Arc<CudaStream>,
    plans: HashMap<Key, Plan>,
}

// SAFETY: the raw cuBLASLt objects are only used under the mutex below.
unsafe impl Send for Stream {}

fn streams() -> &'static Mutex<HashMap<usize, Stream>> {
    static S: OnceLock<Mutex<HashMap<usize, Stream>>> = OnceLock::new();
    S.get_or_init(Default::default)
}

pub fn tuned() -> Vec<Tuned> {
    let s = streams().lock().unwrap_or_else(|e| e.into_inner());
    s.values()
        .flat_map(|st| st.plans.values().map(|p| p.tuned.clone()))
        .collect()
}

pub(super) fn e<E: std::fmt::Debug>(what: &'static str) -> impl Fn(E) -> candle_core::Error {
    move |err| candle_core::Error::Msg(format!("cuBLASLt {what}: {err:?}"))
}

fn layout(
    dt: sys::cudaDataType,
    rows: usize,
    cols: usize,
) -> candle_core::Result<sys::cublasLtMatrixLayout_t> {
    lt::create_matrix_layout(dt, rows as u64, cols as u64, rows as i64).map_err(e("layout"))
}

/// Descriptors for `key`; the algorithm is filled in by [`choose`].
fn describe(key: &Key) -> candle_core::Result<Plan> {
    let dt = if key.bf16 {
        sys::cudaDataType_t::CUDA_R_16BF
    } else {
        sys::cudaDataType_t::CUDA_R_32F
    };
    let dt_out = if key.out_f32 {
        sys::cudaDataType_t::CUDA_R_32F
    } else {
        dt
    };
    let compute = if key.tf32 && !key.bf16 {
        sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32
    } else {
        sys::cublasComputeType_t::CUBLAS_COMPUTE_32F
    };
    let desc =
        lt::create_matmul_desc(compute, sys::cudaDataType_t::CUDA_R_32F).map_err(e("desc"))?;
    // cuBLASLt's A is B's buffer, its B is A's (see the module docs).
    for (attr, t) in [
        (
            sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA,
            key.tb,
        ),
        (
            sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSB,
            key.ta,
        ),
    ] {
        let op: i32 = t.into(); // CUBLAS_OP_N 0, CUBLAS_OP_T 1
                                // SAFETY: desc is live; the attribute is a cublasOperation_t.
        unsafe {
            lt::set_matmul_desc_attribute(desc, attr, (&op) as *const _ as *const c_void, 4)
                .map_err(e("transpose"))?
        };
    }
    if key.sms > 0 {
        let sms = key.sms as i32;
        // SAFETY: desc is live; the attribute is an int32_t.
        unsafe {
            lt::set_matmul_desc_attribute(
                desc,
                sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET,
                (&sms) as *const i32 as *const c_void,
                4,
            )
            .map_err(e("SM count target"))?
        };
    }
    let (m, n, k) = (key.m, key.n, key.k);
    let p = if key.tb {
        layout(dt, k, n)?
    } else {
        layout(dt, n, k)?
    };
    let q = if key.ta {
        layout(dt, m, k)?
    } else {
        layout(dt, k, m)?
    };
    let d = layout(dt_out, n, m)?;
    let tuned = Tuned {
        m,
        n,
        k,
        dtype: key.dtype().into(),
        add: key.add,
        candidates: 0,
        first_us: 0.0,
        best_us: 0.0,
    };
    // SAFETY: an all-zero algo is a valid placeholder until `choose` writes it.
    let algo = unsafe { std::mem::zeroed() };
    Ok(Plan {
        desc,
        p,
        q,
        d,
        algo,
        tuned,
    })
}

/// Raw operands of one call: D = alpha·A·B + beta·C.
#[derive(Clone, Copy)]
pub(super) struct Args {
    pub(super) a: u64,
    pub(super) b: u64,
    pub(super) c: u64,
    pub(super) d: u64,
    pub(super) alpha: f32,
    pub(super) beta: f32,
}

pub(super) fn launch(
    st: &Stream,
    plan: &Plan,
    algo: &sys::cublasLtMatmulAlgo_t,
    x: &Args,
    s: &CudaStream,
) -> candle_core::Result<()> {
    let (alpha, beta) = (x.alpha, x.beta);
    let (w, _g) = st.workspace.device_ptr(s);
    // SAFETY: pointers come from live candle buffers of the shapes the layouts describe;
    // the workspace is this stream's.
    unsafe {
        lt::matmul(
            st.handle,
            plan.desc,
            (&alpha) as *const f32 as *const c_void,
            (&beta) as *const f32 as *const c_void,
            x.b as *const c_void,
            plan.p,
            x.a as *const c_void,
            plan.q,
            x.c as *const c_void,
            plan.d,
            x.d as *mut c_void,
            plan.d,
            algo,
            w as *mut c_void,
            WORKSPACE,
            s.cu_stream() as *mut _,
        )
        .map_err(e("matmul"))
    }
}

/// Runs `x` with `key`'s plan on stream `s`, making the stream's handle and workspace and
/// choosing the plan's algorithm on first use.
pub(super) fn execute(
    key: Key,
    x: &Args,
    dev: &candle_core::CudaDevice,
) -> candle_core::Result<()> {
    let s = &dev.cuda_stream();
    let mut all = streams().lock().unwrap_or_else(|e| e.into_inner());
    let sid = s.cu_stream() as usize;
    let st = match all.entry(sid) {
        Entry::Occupied(o) => o.into_mut(),
        Entry::Vacant(v) => {
            s.context().bind_to_thread().w()?;
            let handle = lt::create_handle().map_err(e("handle"))?;
            // SAFETY: scratch memory cuBLASLt may use as it likes.
            let workspace = unsafe { s.alloc::<u8>(WORKSPACE) }.w()?;
            let side = s.context().new_stream().w()?;
            v.insert(Stream {
                handle,
                workspace,
                side,
                plans: HashMap::new(),
            })
        }
    };
    if !st.plans.contains_key(&key) {
        let mut plan = describe(&key)?;
        super::tune::choose(&key, st, &mut plan, x, dev)?;
        st.plans.insert(key, plan);
    }
    let plan = &st.plans[&key];
    queue(st, plan, &plan.algo, x, dev)
}

/// [`launch`] on `dev`'s compute stream; while it is captured, through
/// `seam::graph::splice`, so that cuBLASLt's memset before the kernel (split-K and stream-K
/// algorithms) is a kernel node of the graph and not a memset node, 4.6 µs shorter a replay.
pub(super) fn queue(
    st: &Stream,
    plan: &Plan,
    algo: &sys::cublasLtMatmulAlgo_t,
    x: &Args,
    dev: &candle_core::CudaDevice,
) -> candle_core::Result<()> {
    let s = &dev.cuda_stream();
    if seam::capture::capturing_stream(s) {
        let spliced = seam::graph::splice(dev, s, &st.side, |side| launch(st, plan, algo, x, side))
            .map_err(candle_core::Error::Msg)?;
        if spliced {
            return Ok(());
        }
    }
    launch(st, plan, algo, x, s)
}

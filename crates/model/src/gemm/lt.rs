//! cuBLASLt for [`super::matmul`]: one handle and one 32 MiB workspace per stream, one
//! plan (descriptors and algorithm) per shape, the algorithm timed once among cuBLASLt's
//! heuristic candidates. The process keeps one choice per shape (the candidate's index in
//! cuBLASLt's list, `super::choices`), which every stream uses.
//!
//! Row-major D (m × n) = A (m × k) · B (k × n) is column-major Dᵀ = Bᵀ · Aᵀ, so cuBLASLt's
//! first operand is B's buffer and its second A's; a transposed view is the transpose op
//! on the contiguous matrix under it.

use super::choices::chosen;
use super::Tuned;
use candle_core::cuda_backend::cudarc::cublaslt::{result as lt, sys};
use candle_core::cuda_backend::cudarc::driver::{sys as drv, CudaSlice, CudaStream, DevicePtr};
use candle_core::cuda_backend::WrapErr;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, OnceLock};

/// How many heuristic candidates the first call of a shape times.
pub const CANDIDATES: usize = 16;
/// Timed calls per candidate.
const REPS: usize = 5;
const WORKSPACE: usize = 32 << 20;

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
}

struct Plan {
    desc: sys::cublasLtMatmulDesc_t,
    p: sys::cublasLtMatrixLayout_t,
    q: sys::cublasLtMatrixLayout_t,
    d: sys::cublasLtMatrixLayout_t,
    algo: sys::cublasLtMatmulAlgo_t,
    tuned: Tuned,
}

/// One stream's handle, workspace and plans (kept for the process).
struct Stream {
    handle: sys::cublasLtHandle_t,
    workspace: CudaSlice<u8>,
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

fn tune_enabled() -> bool {
    static T: OnceLock<bool> = OnceLock::new();
    *T.get_or_init(|| std::env::var("MODEL_GEMM_TUNE").map_or(true, |v| v != "0"))
}

fn e<E: std::fmt::Debug>(what: &'static str) -> impl Fn(E) -> candle_core::Error {
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

fn launch(
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

/// Picks the plan's algorithm: the process's choice for `key` where there is one (timed
/// earlier or set from a table), else cuBLASLt's first heuristic, or (tuning on, not
/// capturing) the fastest of up to [`CANDIDATES`], each timed over [`REPS`] calls after one
/// warm-up; the process then keeps that choice.
fn choose(
    key: &Key,
    st: &Stream,
    plan: &mut Plan,
    x: &Args,
    s: &Arc<CudaStream>,
) -> candle_core::Result<()> {
    let pref = lt::create_matmul_pref().map_err(e("preference"))?;
    let ws = WORKSPACE;
    let mut found =
        vec![unsafe { std::mem::zeroed::<sys::cublasLtMatmulHeuristicResult_t>() }; CANDIDATES];
    let mut count = 0i32;
    // SAFETY: live descriptors; `found` holds CANDIDATES results.
    unsafe {
        lt::set_matmul_pref_attribute(
            pref,
            sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
            (&ws) as *const usize as *const c_void,
            std::mem::size_of::<usize>(),
        )
        .map_err(e("preference"))?;
        sys::cublasLtMatmulAlgoGetHeuristic(
            st.handle,
            plan.desc,
            plan.p,
            plan.q,
            plan.d,
            plan.d,
            pref,
            CANDIDATES as i32,
            found.as_mut_ptr(),
            &mut count,
        )
        .result()
        .map_err(e("heuristic"))?;
        let _ = lt::destroy_matmul_pref(pref);
    }
    found.truncate(count.max(0) as usize);
    found.retain(|h| h.state == sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS);
    if found.is_empty() {
        candle_core::bail!(
            "cuBLASLt has no algorithm for {}x{}x{} ({})",
            plan.tuned.m,
            plan.tuned.n,
            plan.tuned.k,
            plan.tuned.dtype
        );
    }
    plan.algo = found[0].algo;
    let earlier = chosen()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(key)
        .copied();
    if let Some(i) = earlier.filter(|&i| i < found.len()) {
        plan.algo = found[i].algo;
        return Ok(());
    }
    let capturing = seam::capture::capturing_stream(s);
    if !tune_enabled() || capturing || found.len() == 1 {
        chosen()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(*key, 0);
        return Ok(());
    }
    // Each timed call starts from a cold L2 (a scratch of twice its size written first),
    // as in the step, where the weights come from memory: timed hot, split-K and small
    // tiles win on paper and lose in the step (run 25).
    let ctx = s.context();
    let l2 = ctx
        .attribute(drv::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
        .w()? as usize;
    // SAFETY: scratch written by the memset before every read-free use.
    let mut scratch = unsafe { s.alloc::<u8>(2 * l2.max(1 << 20)) }.w()?;
    let timing = Some(drv::CUevent_flags::CU_EVENT_DEFAULT);
    let (t0, t1) = (ctx.new_event(timing).w()?, ctx.new_event(timing).w()?);
    // A sum added to in place (C = D) is not the timing's to change: it times on a copy.
    let mut sum_copy = None;
    if x.c == x.d && x.beta != 0.0 {
        let bytes = key.m * key.n * if key.bf16 && !key.out_f32 { 2 } else { 4 };
        let mut t = unsafe { s.alloc::<u8>(bytes) }.w()?;
        s.memset_zeros(&mut t).w()?;
        sum_copy = Some(t);
    }
    let copy_ptr = sum_copy.as_ref().map(|t| t.device_ptr(s));
    let timed = match &copy_ptr {
        Some((p, _)) => Args { c: *p, d: *p, ..*x },
        None => Args { ..*x },
    };
    let x = &timed;
    let (mut best, mut pick) = (f64::INFINITY, 0);
    for (i, h) in found.iter().enumerate() {
        if launch(st, plan, &h.algo, x, s).is_err() {
            continue;
        }
        let (mut ok, mut us) = (true, 0.0);
        for _ in 0..REPS {
            s.memset_zeros(&mut scratch).w()?;
            t0.record(s).w()?;
            ok &= launch(st, plan, &h.algo, x, s).is_ok();
            t1.record(s).w()?;
            us += t0.elapsed_ms(&t1).w()? as f64 * 1e3 / REPS as f64;
        }
        if i == 0 {
            plan.tuned.first_us = us;
        }
        if ok && us < best {
            (best, pick) = (us, i);
            plan.algo = h.algo;
        }
    }
    plan.tuned.candidates = found.len();
    plan.tuned.best_us = best;
    chosen()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(*key, pick);
    Ok(())
}

/// Runs `x` with `key`'s plan on stream `s`, making the stream's handle and workspace and
/// choosing the plan's algorithm on first use.
pub(super) fn execute(key: Key, x: &Args, s: &Arc<CudaStream>) -> candle_core::Result<()> {
    let mut all = streams().lock().unwrap_or_else(|e| e.into_inner());
    let sid = s.cu_stream() as usize;
    let st = match all.entry(sid) {
        Entry::Occupied(o) => o.into_mut(),
        Entry::Vacant(v) => {
            s.context().bind_to_thread().w()?;
            let handle = lt::create_handle().map_err(e("handle"))?;
            // SAFETY: scratch memory cuBLASLt may use as it likes.
            let workspace = unsafe { s.alloc::<u8>(WORKSPACE) }.w()?;
            v.insert(Stream {
                handle,
                workspace,
                plans: HashMap::new(),
            })
        }
    };
    if !st.plans.contains_key(&key) {
        let mut plan = describe(&key)?;
        choose(&key, st, &mut plan, x, s)?;
        st.plans.insert(key, plan);
    }
    let plan = &st.plans[&key];
    launch(st, plan, &plan.algo, x, s)
}

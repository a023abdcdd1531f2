//! Choosing a shape's algorithm among cuBLASLt's heuristic candidates, by timing each as
//! the step runs it: inside a CUDA graph, from a cold L2.
//!
//! Why in a graph: what the step runs is a replay. Some candidates (on Hopper, cuBLASLt's
//! split-K and stream-K kernels) come with a memset of a 4-byte counter before each
//! launch, which a capture turns into a kernel node (`seam::graph::splice`); a stream
//! timing sees neither that node nor the launch gaps a replay has. (Calls 120-121 found the
//! two timings choosing alike at xl.) `MODEL_GEMM_TUNE=stream` times in the stream instead
//! (the timing before session 24); `MODEL_GEMM_TUNE=0` times nothing;
//! `MODEL_GEMM_TUNE_LOG=1` prints every candidate's two timings and kernel count.

use super::choices::chosen;
use super::lt::{e, launch, queue, Args, Key, Plan, Stream, WORKSPACE};
use candle_core::cuda_backend::cudarc::cublaslt::{result as lt, sys};
use candle_core::cuda_backend::cudarc::driver::{sys as drv, CudaEvent, CudaStream, DevicePtr};
use candle_core::cuda_backend::WrapErr;
use std::ffi::c_void;
use std::sync::{Arc, OnceLock};

/// How many heuristic candidates the first call of a shape times.
pub const CANDIDATES: usize = 16;
/// Timed calls per candidate.
const REPS: usize = 8;

/// How the first call of a shape chooses (`MODEL_GEMM_TUNE`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `0`: cuBLASLt's first heuristic, timing nothing.
    First,
    /// `stream`: each candidate timed as queued on the stream.
    Stream,
    /// The default: each candidate timed as a graph replays it.
    Graph,
}

fn mode() -> Mode {
    static M: OnceLock<Mode> = OnceLock::new();
    *M.get_or_init(|| match std::env::var("MODEL_GEMM_TUNE").as_deref() {
        Ok("0") => Mode::First,
        Ok("stream") => Mode::Stream,
        _ => Mode::Graph,
    })
}

/// cuBLASLt's candidates for the plan (at most [`CANDIDATES`], best guess first).
fn candidates(
    st: &Stream,
    plan: &Plan,
) -> candle_core::Result<Vec<sys::cublasLtMatmulHeuristicResult_t>> {
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
        let got = sys::cublasLtMatmulAlgoGetHeuristic(
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
        .result();
        let _ = lt::destroy_matmul_pref(pref);
        got.map_err(e("heuristic"))?;
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
    Ok(found)
}

/// Picks the plan's algorithm: the process's choice for `key` where there is one (timed
/// earlier or set from a table), else cuBLASLt's first heuristic, or (tuning on, not
/// capturing) the fastest of up to [`CANDIDATES`], each timed over [`REPS`] calls after one
/// warm-up; the process then keeps that choice.
pub(super) fn choose(
    key: &Key,
    st: &Stream,
    plan: &mut Plan,
    x: &Args,
    dev: &candle_core::CudaDevice,
) -> candle_core::Result<()> {
    let s = &dev.cuda_stream();
    let found = candidates(st, plan)?;
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
    if mode() == Mode::First || capturing || found.len() == 1 {
        chosen()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(*key, 0);
        return Ok(());
    }
    // Each timed call starts from a cold L2 (a scratch of twice its size written first, by a
    // kernel), as in the step, where the weights come from memory: timed hot, split-K and
    // small tiles win on paper and lose in the step (run 25).
    let ctx = s.context();
    let l2 = ctx
        .attribute(drv::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
        .w()? as usize;
    let flush_bytes = 2 * l2.max(1 << 20);
    // SAFETY: only ever written (by the flush kernel); never read.
    let scratch = unsafe { s.alloc::<u8>(flush_bytes) }.w()?;
    let (flush_ptr, _g) = scratch.device_ptr(s);
    let flush = || crate::kernels::gpu::l2_flush(dev, flush_ptr, flush_bytes);
    let timing = Some(drv::CUevent_flags::CU_EVENT_DEFAULT);
    let t = (ctx.new_event(timing).w()?, ctx.new_event(timing).w()?);
    // A sum added to in place (C = D) is not the timing's to change: it times on a copy.
    let mut sum_copy = None;
    if x.c == x.d && x.beta != 0.0 {
        let bytes = key.m * key.n * if key.bf16 && !key.out_f32 { 2 } else { 4 };
        let mut c = unsafe { s.alloc::<u8>(bytes) }.w()?;
        s.memset_zeros(&mut c).w()?;
        sum_copy = Some(c);
    }
    let copy_ptr = sum_copy.as_ref().map(|c| c.device_ptr(s));
    let x = match &copy_ptr {
        Some((p, _)) => Args { c: *p, d: *p, ..*x },
        None => Args { ..*x },
    };
    let gemm = |algo: &sys::cublasLtMatmulAlgo_t| queue(st, plan, algo, &x, dev).is_ok();
    // What every graph replay costs besides the GEMM: the flush and the launch.
    let base = match mode() {
        Mode::Graph => graph_us(dev, &t, || flush().is_ok())?.map_or(0.0, |g| g.0),
        _ => 0.0,
    };
    let log = std::env::var_os("MODEL_GEMM_TUNE_LOG").is_some();
    let (mut best, mut pick, mut first) = (f64::INFINITY, 0, 0.0);
    for (i, h) in found.iter().enumerate() {
        if launch(st, plan, &h.algo, &x, s).is_err() {
            continue;
        }
        let graph = match mode() {
            Mode::Graph => graph_us(dev, &t, || flush().is_ok() && gemm(&h.algo))?,
            _ => None,
        };
        // Where no graph could be made of it, the candidate is timed in the stream.
        let us = match graph {
            Some((us, _)) => Some(us - base),
            None => stream_us(s, &t, || flush().is_ok(), || gemm(&h.algo))?,
        };
        if log {
            // What the two timings and the graph's node count say, candidate by candidate.
            let streamed = stream_us(s, &t, || flush().is_ok(), || gemm(&h.algo))?;
            eprintln!(
                "gemm tune {}x{}x{} {}{} candidate {i}: graph {:?} us ({} kernels with the flush), stream {:?} us, workspace {} B",
                key.m,
                key.n,
                key.k,
                key.dtype(),
                if key.add { " +c" } else { "" },
                graph.map(|g| g.0 - base),
                graph.map_or(0, |g| g.1),
                streamed,
                h.workspaceSize
            );
        }
        let Some(us) = us else { continue };
        if i == 0 {
            first = us;
        }
        if us < best {
            (best, pick) = (us, i);
        }
    }
    plan.algo = found[pick].algo;
    plan.tuned.first_us = first;
    plan.tuned.candidates = found.len();
    plan.tuned.best_us = best;
    chosen()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(*key, pick);
    Ok(())
}

/// Microseconds per call of what `queue` queues, each of [`REPS`] calls timed on its own in
/// the stream after `flush` (not timed); `None` where a call failed.
fn stream_us(
    s: &Arc<CudaStream>,
    t: &(CudaEvent, CudaEvent),
    flush: impl Fn() -> bool,
    queue: impl Fn() -> bool,
) -> candle_core::Result<Option<f64>> {
    let (mut ok, mut us) = (true, 0.0);
    for _ in 0..REPS {
        ok &= flush();
        t.0.record(s).w()?;
        ok &= queue();
        t.1.record(s).w()?;
        us += t.0.elapsed_ms(&t.1).w()? as f64 * 1e3 / REPS as f64;
    }
    Ok(ok.then_some(us))
}

/// Microseconds per replay of a graph of what `queue` queues (captured as the step is,
/// `seam::graph::capture`), over [`REPS`] replays after one warm-up, and the graph's kernel
/// count; `None` where the capture failed.
fn graph_us(
    dev: &candle_core::CudaDevice,
    t: &(CudaEvent, CudaEvent),
    queue: impl Fn() -> bool,
) -> candle_core::Result<Option<(f64, usize)>> {
    let s = &dev.cuda_stream();
    let device = candle_core::Device::Cuda(dev.clone());
    let captured = seam::graph::capture(&device, || {
        queue()
            .then_some(())
            .ok_or_else(|| seam::ModelError::Input("a timed GEMM failed".into()))
    });
    let Ok(graph) = captured else {
        return Ok(None);
    };
    let kernels = graph.kernel_nodes().ok().flatten().unwrap_or(0);
    let replay = |g: &seam::graph::CapturedStep<()>| {
        g.replay()
            .map_err(|e| candle_core::Error::Msg(e.to_string()))
    };
    replay(&graph)?;
    t.0.record(s).w()?;
    for _ in 0..REPS {
        replay(&graph)?;
    }
    t.1.record(s).w()?;
    let us = t.0.elapsed_ms(&t.1).w()? as f64 * 1e3 / REPS as f64;
    Ok(Some((us, kernels)))
}

//! Work on a CUDA device captured once as a CUDA graph and replayed: one launch instead of
//! thousands of kernel launches queued one by one from the host.
//!
//! ```ignore
//! let _cache = model::graph::HtodCache::enable(&dev); // before the eager warm-up steps
//! eager_step(&mut opt)?;                               // loads kernels, fills the caches,
//!                                                      // creates AdamW's moments
//! let step = model::graph::capture(&dev, || {         // records; runs nothing
//!     let tape = model::forward(&lm, &batch)?;        // batch: static input tensors
//!     let loss = tape.loss().clone();
//!     let grads = tape.backward(|_, _| Ok::<(), model::ModelError>(()))?;
//!     opt.step(lm.params().vars(), &grads)?;          // reads its scalars from the device
//!     Ok(loss)
//! })?;
//! loop {
//!     batch.input.slice_set(&next.input, 0, 0)?;      // new data into the static inputs
//!     opt.advance_for_replay()?;                      // this step's AdamW scalars
//!     step.replay()?;
//!     let loss = step.outputs().to_scalar::<f32>()?;  // rewritten by every replay
//! }
//! ```
//!
//! What candle and cudarc allow, and what this relies on:
//! - Allocations inside the capture are cuMemAllocAsync calls (candle allocates from the
//!   stream-ordered pool), captured as graph allocation nodes; tensors dropped inside the
//!   capture become free nodes. Tensors the closure returns are graph allocations that
//!   outlive each replay, at fixed addresses: every replay rewrites them, and the graph is
//!   instantiated with auto-free-on-launch so a replay may reuse them.
//! - Host→device copies are not capturable (cudarc synchronises pageable copies). candle's
//!   kernels upload small layout arrays (dims, strides) that way; [`HtodCache`] turns on
//!   candle's cache of such uploads (≤ 4 KiB, keyed by content) during the eager warm-up,
//!   and the capture reuses the cached device copies. Device→host copies (`to_scalar`,
//!   `to_vec`) inside the closure fail the capture, naming the copy.
//! - Events: the compute stream must not record cudarc's per-allocation events (comm's
//!   `cuda_device` turns them off), and nothing inside may synchronise.
//! - Each captured node keeps the priority of the stream it was captured from (instantiated
//!   with use-node-priority): NCCL's high-priority stream stays ahead of the compute
//!   stream's kernels inside a replay, as it is in eager steps.
//! - `SEAM_GRAPH_COMPUTE_PRIORITY=k` raises the kernels captured at the lowest priority
//!   (candle's per-thread stream) k levels (`priority`).
//! - cuBLAS GEMMs are capturable once each shape has run eagerly (workspace allocated).
//! - Kernel arguments are frozen at capture: anything that changes per step must be read
//!   from device memory. The fused AdamW reads its step scalars from a device buffer;
//!   the capture leaves its step count alone, and `AdamW::advance_for_replay` queues the
//!   upload of each replay's scalars (from alternating pinned buffers) before it. The
//!   optimizer must outlive the graph.
//!
//! Capture failure is an `Err` with the reason (the failing op's error), and the caller
//! falls back to eager steps. Without the `cuda` feature or on the CPU it is always `Err`.

use candle_core::Device;

mod allocs;
#[cfg(feature = "cuda")]
mod nodes;
mod priority;
pub use allocs::GraphAllocs;
#[cfg(feature = "cuda")]
pub use nodes::splice;

/// The captured work and the tensors it returns (rewritten by every replay).
pub struct CapturedStep<T> {
    /// Dropped before the graph: freeing graph allocations outside it is allowed.
    outputs: T,
    #[cfg(feature = "cuda")]
    graph: candle_core::cuda_backend::cudarc::driver::CudaGraph,
}

impl<T> CapturedStep<T> {
    /// Queues one replay on the device's compute stream (the host does not wait).
    pub fn replay(&self) -> crate::error::Result<()> {
        #[cfg(feature = "cuda")]
        {
            self.graph
                .launch()
                .map_err(|e| crate::error::ModelError::Input(format!("CUDA graph replay: {e:?}")))
        }
        #[cfg(not(feature = "cuda"))]
        Ok(())
    }

    /// How many kernel launches one replay runs (the graph's kernel nodes); `None` without
    /// CUDA. `bench kernels` profiles the last replay's launches.
    pub fn kernel_nodes(&self) -> crate::error::Result<Option<usize>> {
        #[cfg(feature = "cuda")]
        {
            use candle_core::cuda_backend::cudarc::driver::sys;
            let err = |e: String| crate::error::ModelError::Input(format!("CUDA {e}"));
            let mut kernels = 0;
            for node in nodes::nodes(self.graph.cu_graph()).map_err(err)? {
                let t = nodes::node_type(node).map_err(err)?;
                kernels += usize::from(t == sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_KERNEL);
            }
            Ok(Some(kernels))
        }
        #[cfg(not(feature = "cuda"))]
        Ok(None)
    }

    /// The graph's allocation nodes, walked in capture order ([`GraphAllocs`]); `None`
    /// without CUDA.
    pub fn allocations(&self) -> crate::error::Result<Option<GraphAllocs>> {
        #[cfg(feature = "cuda")]
        {
            allocs::walk(self.graph.cu_graph())
                .map(Some)
                .map_err(|e| crate::error::ModelError::Input(format!("CUDA {e}")))
        }
        #[cfg(not(feature = "cuda"))]
        Ok(None)
    }

    /// What the captured closure returned; valid after each replay completes (reading it
    /// on the compute stream, as candle does, orders after the replay).
    pub fn outputs(&self) -> &T {
        &self.outputs
    }
}

/// Whether `device`'s compute stream is being captured now (ops that read back to the
/// host must not run then).
pub fn capturing(device: &Device) -> bool {
    #[cfg(feature = "cuda")]
    if let Device::Cuda(d) = device {
        return capturing_stream(&d.cuda_stream());
    }
    let _ = device;
    false
}

/// [`capturing`] for a stream.
#[cfg(feature = "cuda")]
pub(crate) use crate::capture::capturing_stream;

/// candle's cache of small host→device uploads, on while this lives (this thread only).
pub struct HtodCache {
    _guard: Option<Box<dyn std::any::Any>>,
}

impl HtodCache {
    /// Turns the cache on for `device` (nothing on the CPU).
    pub fn enable(device: &Device) -> Self {
        match device {
            #[cfg(feature = "cuda")]
            Device::Cuda(d) => Self {
                _guard: Some(Box::new(d.enable_cuda_graph_htod_cache())),
            },
            _ => Self { _guard: None },
        }
    }
}

/// Captures what `f` queues on `device`'s compute stream as a graph. Nothing runs: the
/// first [`CapturedStep::replay`] does it. `Err(reason)` when capture is impossible (the
/// CPU, a build without `cuda`) or failed (the reason names the failing op).
pub fn capture<T>(
    device: &Device,
    f: impl FnOnce() -> crate::error::Result<T>,
) -> Result<CapturedStep<T>, String> {
    #[cfg(feature = "cuda")]
    {
        use candle_core::cuda_backend::cudarc::driver::sys;
        let Device::Cuda(d) = device else {
            return Err("not a CUDA device".into());
        };
        let stream = d.cuda_stream();
        let levels =
            priority::levels(std::env::var("SEAM_GRAPH_COMPUTE_PRIORITY").ok().as_deref())?;
        // Everything queued before must not become part of the graph.
        device
            .synchronize()
            .map_err(|e| format!("before capture: {e}"))?;
        stream
            .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(|e| format!("cuStreamBeginCapture: {e:?}"))?;
        let out = f();
        let raised = match (&out, levels) {
            (Ok(_), 1..) => Some(priority::raise_lowest(&stream, levels)),
            _ => None,
        };
        // An error cudarc recorded inside the capture (a drop's free, say) would make
        // end_capture return it before ending the capture: take it first, and fail with it.
        let recorded = stream.context().check_err();
        // Each node runs at the priority of the stream it was captured from (NCCL's
        // stream may rank above the compute stream), not at the launching stream's.
        let flags = sys::CUgraphInstantiate_flags(
            sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH.0
                | sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY.0,
        );
        let ended = stream.end_capture(flags);
        let reason = match (out, ended) {
            (Ok(_), _) if recorded.is_err() => format!(
                "a call inside the capture failed ({:?})",
                recorded.err().map(|e| e.0)
            ),
            (Ok(_), _) if matches!(raised, Some(Err(_))) => {
                raised.and_then(|r| r.err()).unwrap_or_default()
            }
            (Ok(outputs), Ok(Some(graph))) => {
                if let Some(Ok((kernels, up))) = raised {
                    eprintln!("seam: {up} of {kernels} kernel nodes run {levels} priority levels above the lowest (SEAM_GRAPH_COMPUTE_PRIORITY)");
                }
                return Ok(CapturedStep { outputs, graph });
            }
            (Err(e), _) => format!(
                "the captured work failed: {}",
                e.to_string().lines().next().unwrap_or("")
            ),
            (Ok(_), Ok(None)) => "capture produced no graph".into(),
            (Ok(_), Err(e)) => format!(
                "capture was invalidated ({e:?}): an op synchronised or made an uncapturable call"
            ),
        };
        // The abandoned capture's tensors are gone; cudarc keeps the last error of their
        // frees, which would otherwise surface on the next eager op.
        let _ = stream.context().check_err();
        Err(reason)
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = f;
        Err(if device.is_cuda() {
            "built without the cuda feature".into()
        } else {
            "not a CUDA device".into()
        })
    }
}

/// A device attribute of graph memory: read, or with `set`, zeroed.
#[cfg(feature = "cuda")]
fn graph_mem_attr(
    device: &Device,
    attr: candle_core::cuda_backend::cudarc::driver::sys::CUgraphMem_attribute,
    set: bool,
) -> Option<u64> {
    use candle_core::cuda_backend::cudarc::driver::sys;
    let Device::Cuda(d) = device else { return None };
    let ctx = d.cuda_stream().context().clone();
    ctx.bind_to_thread().ok()?;
    let mut v: u64 = 0;
    // SAFETY: plain driver calls on a u64 (only 0 may be set).
    let r = unsafe {
        if set {
            sys::cuDeviceSetGraphMemAttribute(ctx.cu_device(), attr, &mut v as *mut u64 as *mut _)
        } else {
            sys::cuDeviceGetGraphMemAttribute(ctx.cu_device(), attr, &mut v as *mut u64 as *mut _)
        }
    };
    (r == sys::CUresult::CUDA_SUCCESS).then_some(v)
}

/// Highest bytes of graph memory in use on `device`'s GPU since [`reset_mem_high`]
/// (`CU_GRAPH_MEM_ATTR_USED_MEM_HIGH`: graph allocations live outside candle's pool);
/// `None` on the CPU or without `cuda`.
pub fn mem_high(device: &Device) -> Option<u64> {
    #[cfg(feature = "cuda")]
    {
        use candle_core::cuda_backend::cudarc::driver::sys::CUgraphMem_attribute as A;
        let _ = device.synchronize();
        graph_mem_attr(device, A::CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, false)
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = device;
        None
    }
}

/// Zeroes [`mem_high`].
pub fn reset_mem_high(device: &Device) {
    #[cfg(feature = "cuda")]
    {
        use candle_core::cuda_backend::cudarc::driver::sys::CUgraphMem_attribute as A;
        let _ = graph_mem_attr(device, A::CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, true);
    }
    let _ = device;
}

/// Gives the graph memory no graph holds any more back to the device (after a
/// [`CapturedStep`] is dropped, so the next model can use it).
pub fn trim(device: &Device) {
    #[cfg(feature = "cuda")]
    if let Device::Cuda(d) = device {
        let _ = device.synchronize();
        let ctx = d.cuda_stream().context().clone();
        if ctx.bind_to_thread().is_ok() {
            // SAFETY: a plain driver call on this context's device.
            unsafe {
                candle_core::cuda_backend::cudarc::driver::sys::cuDeviceGraphMemTrim(
                    ctx.cu_device(),
                );
            }
        }
    }
    let _ = device;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_on_the_cpu_is_an_error_with_a_reason_and_runs_nothing() {
        let mut ran = false;
        let r = capture(&Device::Cpu, || {
            ran = true;
            Ok(())
        });
        assert_eq!(r.err().as_deref(), Some("not a CUDA device"));
        assert!(!ran);
        assert!(mem_high(&Device::Cpu).is_none());
        reset_mem_high(&Device::Cpu);
        trim(&Device::Cpu);
        let _cache = HtodCache::enable(&Device::Cpu);
    }
}

//! The adds of a copy-engine reduce-scatter (`super::ce_reduce`): the kernel's argument
//! and grid, and the launch in flight ([`CeReduceWork`]) that queues them (with the sums of
//! squares where asked) and frees the slots once the parts have arrived.

use super::ce::flag_op;
use super::ce_reduce::Reduces;
use super::ce_schedule::Op;
use super::comm::drv;
use super::window::Span;
use crate::error::Result;
use crate::{PendingWork, Work};
use candle_core::cuda_backend::cudarc::driver::{
    CudaEvent, CudaFunction, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg,
};
use cudarc::driver::sys::CUstream;
use std::sync::{Arc, Mutex};

/// Runs a launch of the adds takes (`COMM_SUM_RUNS` in kernels/sum.cu).
pub(super) const RUNS: usize = 8;

/// The adds' argument, laid out as kernels/sum.cu's `struct SumRuns` (unused runs zero).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct Runs {
    pub(super) own: [u64; RUNS],
    pub(super) dst: [u64; RUNS],
    pub(super) src: [u64; RUNS],
    pub(super) n: [u64; RUNS],
    pub(super) stride: [u64; RUNS],
    pub(super) scale: [f32; RUNS],
}

// SAFETY: plain data, laid out as the kernel's struct.
unsafe impl DeviceRepr for Runs {}

/// The most blocks a run takes (`super::adds_policy::adds_blocks`), set once per process by the
/// first communicator with copy-engine reduce-scatters.
pub(super) static MOST_BLOCKS: std::sync::OnceLock<u32> = std::sync::OnceLock::new();

/// Blocks of one launch of the adds whose largest run has `most` elements.
pub(super) fn grid(most: u64) -> u32 {
    let cap = u64::from(*MOST_BLOCKS.get().unwrap_or(&(132 * 4)));
    most.div_ceil(8 * 256).clamp(1, cap) as u32
}

/// The adds' kernel launches of buffers of `chunks` elements (in order, `RUNS` a launch):
/// each one's blocks (x, its grid; y, its runs).
pub(super) fn launches(chunks: &[u64]) -> Vec<(u32, u32)> {
    (chunks.chunks(RUNS))
        .map(|c| (grid(c.iter().copied().max().unwrap_or(0)), c.len() as u32))
        .collect()
}

/// A copy-engine reduce-scatter in flight: its arrival (`inner`), then the adds and the
/// "ready" flags (`freed`) that waiting queues.
pub(super) struct CeReduceWork {
    pub(super) inner: Option<Work>,
    pub(super) compute: Arc<CudaStream>,
    pub(super) func: CudaFunction,
    pub(super) runs: Vec<Runs>,
    /// With a sum of squares: its kernel, where the blocks' sums go, and where the total.
    pub(super) squares: Option<(CudaFunction, u64, u64)>,
    /// The window and the ops that free this rank's slots (`Schedule::first`).
    pub(super) freed: (Span, Vec<Op>),
    pub(super) parts: u32,
    /// The communicator's windows, and which one this launch holds (closed at its drop).
    pub(super) reduces: (Arc<Mutex<Reduces>>, usize),
    /// Recorded after the adds where they were queued at the launch (`COMM_CE_ADDS`).
    pub(super) added: Option<CudaEvent>,
    /// Whether the adds were queued at the launch (`added` once they all were).
    pub(super) at_launch: bool,
    pub(super) finished: bool,
}

impl CeReduceWork {
    /// Once: the compute stream waits for the parts (unless `synchronize` has seen them
    /// arrive), then adds them and frees the slots, or waits for the adds queued at the
    /// launch.
    fn finish(&mut self) -> Result<()> {
        if std::mem::replace(&mut self.finished, true) {
            return Ok(());
        }
        if let Some(inner) = self.inner.take() {
            inner.wait()?;
        }
        match (&self.added, self.at_launch) {
            (Some(e), _) => self.compute.wait(e).map_err(drv(
                "cuStreamWaitEvent (compute after the copy-engine adds)",
            )),
            (None, true) => Ok(()), // queueing them failed, and said so
            (None, false) => self.queue_adds(&self.compute.clone()),
        }
    }

    /// Queues on `s` the adds (after the parts have arrived) and the "ready" flags after them.
    pub(super) fn queue_adds(&self, s: &Arc<CudaStream>) -> Result<()> {
        let parts = self.parts;
        let mut block = 0u64; // the blocks' sums of squares before this launch's
        for runs in &self.runs {
            let used = runs.n.iter().filter(|&&n| n > 0).count() as u32;
            let x = grid(runs.n.iter().copied().max().unwrap_or(0));
            let cfg = LaunchConfig {
                grid_dim: (x, used, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            };
            let sq: u64 = self.squares.as_ref().map_or(0, |q| q.1 + 4 * block);
            block += u64::from(x) * u64::from(used);
            let mut b = s.launch_builder(&self.func);
            b.arg(runs);
            b.arg(&parts);
            b.arg(&sq);
            // SAFETY: each run's destination holds n bf16 (this rank's chunk) and its
            // source `parts` slots of n bf16 `stride` apart (this rank's window), both
            // alive until the adds end (the window with the communicator; the buffer with
            // the caller, who waited for it); `sq`, 0 or room in the window for one f32 a
            // block (`Group::partials`, counted by `launches`).
            unsafe { b.launch(cfg) }.map_err(drv("cuLaunchKernel (copy-engine adds)"))?;
        }
        if let Some((f, at, out)) = &self.squares {
            let cfg = LaunchConfig {
                grid_dim: (1, 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut b = s.launch_builder(f);
            b.arg(at);
            b.arg(&block);
            b.arg(out);
            // SAFETY: `at` holds `block` f32 the adds wrote; `out`, the caller's one f32,
            // held by the work's tensors until it is waited for.
            unsafe { b.launch(cfg) }.map_err(drv("cuLaunchKernel (sum of squares)"))?;
        }
        let no_push = |_: CUstream, _: usize| Ok(());
        for &o in &self.freed.1 {
            flag_op(s.cu_stream(), self.freed.0, o, &no_push)?;
        }
        Ok(())
    }
}

/// A work dropped without `wait` still adds and frees the slots (the peers' next launch
/// waits for that); either way the launch is closed.
impl Drop for CeReduceWork {
    fn drop(&mut self) {
        let _ = self.finish();
        let mut r = self.reduces.0.lock().unwrap_or_else(|e| e.into_inner());
        r.windows.close(self.reduces.1);
    }
}

impl PendingWork for CeReduceWork {
    fn wait(mut self: Box<Self>) -> Result<()> {
        self.finish()
    }

    /// The parts' arrival (with the watchdog's timeout), then the adds.
    fn synchronize(mut self: Box<Self>) -> Result<()> {
        if let Some(inner) = self.inner.take() {
            inner.synchronize()?;
        }
        self.finish()?;
        self.compute
            .synchronize()
            .map_err(drv("cuStreamSynchronize"))
    }

    /// Whether every part has arrived (the adds are queued by `wait`).
    fn is_completed(&self) -> Result<bool> {
        self.inner.as_ref().map_or(Ok(true), Work::is_completed)
    }
}

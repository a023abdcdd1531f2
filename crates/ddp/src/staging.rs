//! Reduce-scatter buckets staged in NCCL windows (experimental: `DDP_RS_WINDOW=1`, in
//! reduce-scatter mode above one rank).
//!
//! NCCL (2.28.7 or later) runs a collective with its symmetric kernels, which take fewer SMs
//! than the ring's, only when both its ends lie in a registered window
//! ([`comm::Communicator::gather_buffer`]). The backward's gradients are candle's
//! allocations, so each bucket gets one window, made once (every rank the same sizes in the
//! same order), and [`crate::launch`] copies the bucket's gradients into it (the large ones
//! at their offsets, then the flat buffer) and reduce-scatters there, in place. The
//! symmetric kernels take `Sum` only (NCCL's `Avg` of floats is a pre-multiplied sum), so a
//! staged bucket is summed and its parts are multiplied by 1/W when collected
//! ([`Staging::collect_scale`]). On the CPU, and below NCCL 2.28.7, a window is a plain
//! buffer: the same arithmetic, no symmetric kernel.

use crate::error::Result;
use crate::reducer::Ddp;
use candle_core::{DType, Tensor};

/// The staging windows, by bucket (empty: staging off).
#[derive(Default)]
pub(crate) struct Staging {
    windows: Vec<Tensor>,
    world: usize,
}

impl Staging {
    /// Whether `DDP_RS_WINDOW=1` asks for staging.
    fn wanted() -> bool {
        std::env::var("DDP_RS_WINDOW").is_ok_and(|v| v == "1")
    }

    /// One window per bucket of `ddp` where staging is wanted and applies (reduce-scatter
    /// mode, more than one rank): its in-place gradients' elements, then its flat part's,
    /// padded to a multiple of the world size, in the wire dtype.
    pub(crate) fn new(ddp: &Ddp) -> Result<Self> {
        let w = ddp.comm.world_size();
        if !(Self::wanted() && ddp.opts.reduce_scatter && w > 1) {
            return Ok(Self::default());
        }
        let dtype = ddp.opts.grad_dtype.unwrap_or(DType::F32);
        let windows = ddp
            .buckets
            .iter()
            .map(|b| {
                let (alone, flat) = b.params.iter().fold((0, 0), |(a, f), &i| {
                    let n = ddp.shapes[i].elem_count();
                    match ddp.shards_in_place(i) {
                        true => (a + n, f),
                        false => (a, f + n),
                    }
                });
                let len = alone + flat + (w - flat % w) % w;
                Ok(ddp.comm.gather_buffer(len, dtype, &ddp.device)?)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { windows, world: w })
    }

    /// Bucket `b`'s window, where staging is on.
    pub(crate) fn window(&self, b: usize) -> Option<&Tensor> {
        self.windows.get(b)
    }

    /// Whether staged buckets are summed (and scaled when collected) rather than averaged.
    pub(crate) fn on(&self) -> bool {
        !self.windows.is_empty()
    }

    /// What a collected part is multiplied by: `scale` (the micro-batch factor, if any),
    /// times 1/W where the reduce-scatter summed.
    pub(crate) fn collect_scale(&self, scale: Option<f64>) -> Option<f64> {
        match self.on() {
            true => Some(scale.unwrap_or(1.0) / self.world as f64),
            false => scale,
        }
    }
}

/// `g` (flat, contiguous, the window's dtype) copied into `window` at `*off`; returns the
/// window's view there and moves `*off` past it.
pub(crate) fn stage(window: &Tensor, g: &Tensor, off: &mut usize) -> Result<Tensor> {
    let n = g.elem_count();
    window.slice_set(g, 0, *off)?;
    let view = window.narrow(0, *off, n)?;
    *off += n;
    Ok(view)
}

//! AdamW inside the staged backward (PyTorch's optimizer-in-backward recipe): each stage's
//! parameters are updated as soon as [`crate::Tape::backward`] has made their gradients
//! final, and those gradients are freed then. A few stages' gradients are alive at a time
//! instead of the whole model's at the end of the backward, and the updates (memory-bound)
//! can run on a second CUDA stream beside the backward's compute-bound GEMMs.
//!
//! How to use:
//! ```ignore
//! let side = SideStream::new(&device)?; // or no second stream: None below
//! let tape = seam::forward(&model, &batch)?;
//! let mut ib = InBackward::begin(&mut opt, model.params(), Some(&side))?;
//! tape.backward(|s, grads| ib.stage(&model.stage_params(s), grads))?;
//! ib.finish()?;
//! ```
//! The parameters end bit-identical to `opt.step_params(params, &grads)` after the
//! backward: the same kernels with the same scalars, each parameter updated once. What it
//! cannot do: clip by the global gradient norm (known only after the last stage). With
//! DDP, `stage` takes each bucket's gradients once its reduce is done
//! (`ddp::Ddp::forward_backward_reduced`, as `step::TrainStep` runs it).
//!
//! The second stream ([`SideStream`]) is ordered by hand, with events:
//! - fork: the stage's updates wait for everything queued on the compute stream so far
//!   (its backward, the moments and bf16 copies allocated for them);
//! - the stage's gradients are freed (stream-ordered, on the compute stream) only after
//!   the compute stream has waited for the event that follows their updates, [`LAG`]
//!   stages later ([`SideStream::with_lag`]), so the wait rarely stalls it;
//! - join ([`InBackward::finish`], or drop): the compute stream waits for every update, so
//!   the next forward reads updated parameters.
//!
//! Nothing else reads a stage's parameters once its backward is queued (earlier stages
//! use their own). The device must not track per-allocation events
//! (`comm::nccl::cuda_device`), as for any captured step: the events above are the
//! ordering. Inside a CUDA-graph capture the fork and join become the graph's edges, so
//! a replay runs the updates beside the backward too.

use crate::adamw::AdamW;
use crate::error::{ModelError, Result};
use crate::params::ParamSet;
use crate::staged::Grads;
use candle_core::{Device, Tensor};
use std::collections::VecDeque;

/// cudarc's stream.
#[cfg(feature = "cuda")]
pub use candle_core::cuda_backend::cudarc::driver::CudaStream as Stream;
/// Without CUDA there is no stream (a type with no values, as candle's dummy backends).
#[cfg(not(feature = "cuda"))]
pub enum Stream {}

#[cfg(feature = "cuda")]
pub(crate) type Event = candle_core::cuda_backend::cudarc::driver::CudaEvent;
/// Without CUDA no event is ever made (there is no side stream).
#[cfg(not(feature = "cuda"))]
pub(crate) struct Event;

/// Stages between queuing a stage's updates and freeing its gradients, by default.
pub const LAG: usize = 2;

/// A second stream on a CUDA device, for the updates.
pub struct SideStream {
    side: std::sync::Arc<Stream>,
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    compute: std::sync::Arc<Stream>,
    blocks: Option<u32>,
    lag: usize,
}

impl SideStream {
    /// A new stream beside `device`'s compute stream. Refused on the CPU, and on a device
    /// that tracks per-allocation events (make it with `comm::nccl::cuda_device`).
    pub fn new(device: &Device) -> Result<Self> {
        #[cfg(feature = "cuda")]
        if let Device::Cuda(d) = device {
            if d.is_event_tracking() {
                return Err(ModelError::Input(
                    "a second stream for AdamW needs a device without per-allocation event \
                     tracking (comm::nccl::cuda_device makes one)"
                        .into(),
                ));
            }
            let compute = d.cuda_stream();
            let side = compute.context().new_stream().map_err(cuda)?;
            return Ok(Self {
                side,
                compute,
                blocks: None,
                lag: LAG,
            });
        }
        Err(ModelError::Input(format!(
            "a second stream for AdamW needs a CUDA device, got {device:?}"
        )))
    }

    /// At most `blocks` blocks per update kernel (`None`: the kernel's own grid, which
    /// fills the GPU): a few blocks leave the SMs to the backward's GEMMs and trickle the
    /// updates beside them, where a full grid takes the SMs in turn with them.
    pub fn with_max_blocks(mut self, blocks: Option<u32>) -> Self {
        self.blocks = blocks.filter(|&b| b > 0);
        self
    }

    /// Free a stage's gradients `lag` (≥ 1) stages after its updates were queued: a longer
    /// lag stalls the backward less when the updates run slower than it, and keeps more
    /// gradients alive.
    pub fn with_lag(mut self, lag: usize) -> Self {
        self.lag = lag.max(1);
        self
    }

    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn stream(&self) -> &std::sync::Arc<Stream> {
        &self.side
    }

    /// The update kernels' block cap (`None`: their full grid).
    pub fn max_blocks(&self) -> Option<u32> {
        self.blocks
    }

    /// Stages between queuing a stage's updates and freeing its gradients.
    pub fn lag(&self) -> usize {
        self.lag
    }

    /// The side stream waits for everything queued on the compute stream so far.
    pub(crate) fn fork(&self) -> Result<()> {
        #[cfg(feature = "cuda")]
        {
            let e = self.compute.record_event(None).map_err(cuda)?;
            self.side.wait(&e).map_err(cuda)?;
        }
        Ok(())
    }

    /// An event after everything queued on the side stream so far.
    pub(crate) fn done(&self) -> Result<Event> {
        #[cfg(feature = "cuda")]
        return self.side.record_event(None).map_err(cuda);
        #[cfg(not(feature = "cuda"))]
        match *self.side {}
    }

    /// The compute stream waits for `e`.
    pub(crate) fn compute_waits(&self, e: &Event) -> Result<()> {
        #[cfg(feature = "cuda")]
        return self.compute.wait(e).map_err(cuda);
        #[cfg(not(feature = "cuda"))]
        {
            let _ = e;
            match *self.side {}
        }
    }
}

#[cfg(feature = "cuda")]
fn cuda(e: candle_core::cuda_backend::cudarc::driver::DriverError) -> ModelError {
    ModelError::Input(format!("AdamW's second stream: {e:?}"))
}

/// One step of AdamW run stage by stage inside a backward.
pub struct InBackward<'a> {
    opt: &'a mut AdamW,
    params: &'a ParamSet,
    side: Option<&'a SideStream>,
    /// Gradients read by queued side-stream updates, with the event after those updates.
    pending: VecDeque<(Event, Vec<Tensor>)>,
}

impl<'a> InBackward<'a> {
    /// Starts one step of `opt` over `params` (its step count and scalars), updates on
    /// `side` if given, else on the compute stream.
    pub fn begin(
        opt: &'a mut AdamW,
        params: &'a ParamSet,
        side: Option<&'a SideStream>,
    ) -> Result<Self> {
        opt.begin_step(params.vars())?;
        Ok(Self {
            opt,
            params,
            side,
            pending: VecDeque::new(),
        })
    }

    /// Updates the parameters `idx` (a stage's) from their gradients in `grads`, which it
    /// takes; parameters without a gradient are skipped, as in [`AdamW::step`].
    pub fn stage(&mut self, idx: &[usize], grads: &mut Grads) -> Result<()> {
        let mut taken = Vec::new();
        for &i in idx {
            let g = grads.get_mut(i).ok_or_else(|| {
                let n = self.params.vars().len();
                ModelError::Input(format!("stage parameter {i} of {n} has no slot"))
            })?;
            if let Some(g) = g.take() {
                taken.push((i, g));
            }
        }
        self.update(taken)
    }

    /// Updates the parameters of `taken` (parameter index, its final gradient), each
    /// gradient freed once its update no longer needs it: a stage's, or with DDP a
    /// bucket's once its reduce is done (`ddp::Ddp::forward_backward_reduced`).
    pub fn update(&mut self, taken: Vec<(usize, Tensor)>) -> Result<()> {
        let vars = self.params.vars();
        if let Some((i, _)) = taken.iter().find(|(i, _)| *i >= vars.len()) {
            return Err(ModelError::Input(format!(
                "parameter {i} of {}: no such parameter",
                vars.len()
            )));
        }
        let shadows = Some(self.params.bf16_shadows()).filter(|s| s.enabled());
        let Some(side) = self.side else {
            // Same stream: each gradient is freed after its update, in stream order.
            return self.opt.update_many(vars, &taken, shadows, None);
        };
        // Everything the side launches read or write exists before the fork.
        let (mut ready, mut here) = (Vec::with_capacity(taken.len()), Vec::new());
        for (i, g) in taken {
            match self.opt.prepare_side(i, &vars[i], &g, shadows)? {
                Some(g) => ready.push((i, g)),
                None => here.push((i, g)),
            }
        }
        self.opt.update_many(vars, &here, shadows, None)?;
        if ready.is_empty() {
            return Ok(());
        }
        side.fork()?;
        self.opt.update_many(vars, &ready, shadows, Some(side))?;
        self.pending
            .push_back((side.done()?, ready.into_iter().map(|(_, g)| g).collect()));
        while self.pending.len() > side.lag {
            let (e, gs) = self.pending.pop_front().expect("non-empty");
            side.compute_waits(&e)?;
            drop(gs);
        }
        Ok(())
    }

    /// Ends the step: the compute stream waits for every update, then the last
    /// gradients are freed.
    pub fn finish(mut self) -> Result<()> {
        self.join()
    }

    fn join(&mut self) -> Result<()> {
        if let Some(side) = self.side {
            if !self.pending.is_empty() {
                let e = side.done()?;
                side.compute_waits(&e)?;
            }
        }
        self.pending.clear();
        Ok(())
    }
}

impl Drop for InBackward<'_> {
    /// A step abandoned on an error still joins, so no gradient is freed under an update.
    fn drop(&mut self) {
        let _ = self.join();
    }
}

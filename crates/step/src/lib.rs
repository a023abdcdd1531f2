//! One training step, written once, for every path (`train`, the benchmarks, the tests):
//! torchtitan's `train_step`, with data parallelism plugged in as a [`Strategy`].
//!
//! ```ignore
//! let mut step = step::TrainStep::new(&model, Box::new(step::Local), adamw_cfg, opts)?;
//! for s in 0..steps {
//!     let micro: Vec<Batch> = data.batches(s);        // host (CPU) tensors are best
//!     if let Some(prev) = step.step(&model, &micro, schedule.lr(s))? {
//!         log(s - 1, prev.loss, prev.grad_norm);       // step s - 1, read while s runs
//!     }
//! }
//! let last = step.flush()?;                            // the last step's values
//! ```
//!
//! What it owns, each in one place:
//! - micro-batch accumulation (gradients summed in f32 and averaged; the loss summed on
//!   the device);
//! - nothing of the gradient synchronisation: that is the [`Strategy`] plugged in (one
//!   rank, any `ddp` strategy, DDP plus the sharded optimizer, ZeRO-1, or one of its own);
//! - clipping by the global norm, as `torch.nn.utils.clip_grad_norm_`: on CUDA one
//!   multi-tensor kernel writes `[norm, coef]` on the device and the fused AdamW reads
//!   `coef` there (`seam::clip`);
//! - the learning rate of the schedule, uploaded with AdamW's per-step scalars;
//! - where AdamW runs ([`AdamwPlace`]: inside the backward only where that is exact);
//! - the bf16 weight copies (`AdamW::step_params` writes them);
//! - the loss and the norm, read back to the host once per step, one step late;
//! - on CUDA, the batch uploaded from pinned memory into fixed device tensors ([`slots`])
//!   and the whole step captured as one CUDA graph after one eager step, collectives
//!   included (every rank captures the same step; where one fails, all run eager and
//!   [`TrainStep::graph_status`] says why). The watchdog watches each replay.

mod ckpt;
mod core;
mod eval;
pub mod format;
pub mod place;
pub mod slots;
mod stop;
pub mod strategy;

use anyhow::{bail, Context, Result};
use candle_core::{Device, Tensor};
pub use place::{AdamwPlace, NormPlace};
use seam::{AdamW, AdamWConfig, Batch, StagedModel};
pub use strategy::{Local, Strategy};

/// The update kernels' block cap on AdamW's side stream (two an SM of an H100 or H200),
/// where they share the SMs with the backward's fp32 SIMT GEMMs: on nvidia-h200, xl fp32
/// took 298.94 ms a step with it against 303.91 with the full grid, 2.7B 462.48 against
/// 482.55 with AdamW after the backward (docs/results/single-gpu-h200.md, runs 29-31).
pub const ADAMW_SIDE_BLOCKS: u32 = 264;

/// How a step is run (not what it computes, except `clip`).
#[derive(Debug, Clone, Copy)]
pub struct StepOptions {
    /// Clip the gradients to this global norm (0: no clipping).
    pub clip: f64,
    pub adamw: AdamwPlace,
    /// Where a clipping step takes the gradient norm (`STEP_NORM` overrides it).
    pub norm: NormPlace,
    /// Skip a step whose gradient norm is not finite (AdamW writes nothing: Megatron's
    /// skipped iteration, PyTorch GradScaler's skipped step), for a caller that carries on
    /// past it; the norm is then taken even without clipping. AdamW's step count still
    /// advances (its bias corrections count the skipped step). Not with `zero1::Sharded`.
    pub skip_nonfinite: bool,
    /// Capture the step as a CUDA graph after one eager step (CUDA only).
    pub graph: bool,
    /// The model computes in fp32 on SIMT GEMMs (no TF32): `auto` then puts AdamW on a
    /// side stream beside the backward.
    pub fp32_simt: bool,
    /// Side stream: block cap of the update kernels (0: their full grid;
    /// [`ADAMW_SIDE_BLOCKS`] unless set), lag in stages.
    pub side_blocks: u32,
    pub side_lag: usize,
}

impl Default for StepOptions {
    fn default() -> Self {
        Self {
            clip: 0.0,
            adamw: AdamwPlace::Auto,
            norm: NormPlace::After,
            skip_nonfinite: false,
            graph: true,
            fp32_simt: false,
            side_blocks: ADAMW_SIDE_BLOCKS,
            side_lag: 1,
        }
    }
}

/// What one step measured, read back on the host.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepOut {
    /// Mean loss over the micro-batches (and the ranks).
    pub loss: f64,
    /// Global gradient norm before clipping; `None` where AdamW ran inside the backward
    /// (no norm is taken there).
    pub grad_norm: Option<f64>,
    /// Some rank asked to stop by this step ([`TrainStep::request_stop`]): every rank
    /// reads the same value from the same step.
    pub stop: bool,
    /// Some rank asked for a checkpoint by this step ([`TrainStep::request_checkpoint`]),
    /// or to stop: every rank reads the same value from the same step.
    pub checkpoint: bool,
    /// Seconds from the end of the step before it (on this `TrainStep`) to the end of this
    /// one: on a GPU the device's clock, between events after each step; on the CPU the
    /// host's. It holds whatever ran between them (an evaluation, a checkpoint, the host's
    /// stalls). `None` for the first step.
    pub seconds: Option<f64>,
}

pub(crate) enum Graph {
    /// Not asked for, or impossible: why.
    Off(String),
    /// Asked for: captured after the first eager step.
    Wanted,
    On(seam::graph::CapturedStep<Tensor>),
}

impl Graph {
    /// `Ok` when captured, else why not.
    pub(crate) fn status(&self) -> std::result::Result<(), String> {
        match self {
            Graph::On(_) => Ok(()),
            Graph::Wanted => Err("not captured yet (after the first eager run)".into()),
            Graph::Off(why) => Err(why.clone()),
        }
    }
}

/// One rank's training step (see the crate docs).
pub struct TrainStep {
    core: core::Core,
    device: Device,
    slots: slots::Slots,
    graph: Graph,
    /// The step whose values have not been read yet.
    pending: Option<slots::Ticket>,
    eager_steps: u64,
    /// Why no graph was asked for or can be had on this device (`None`: graphs wanted);
    /// validation follows it.
    no_graph: Option<String>,
    /// Validation's slots and its captured forward (made on the first).
    eval: Option<eval::Eval>,
    /// The ranks' agreement to stop ([`Self::enable_stop`]).
    stop: Option<stop::Stop>,
    // Last: the cache outlives the graphs (drop order is declaration order).
    _cache: Option<seam::graph::HtodCache>,
}

impl TrainStep {
    /// A step for `model` (its parameters on `device`), synchronised by `strategy`, with AdamW
    /// of `cfg` (the learning rate is set by each [`Self::step`]).
    pub fn new(
        model: &dyn StagedModel,
        strategy: Box<dyn Strategy>,
        cfg: AdamWConfig,
        opts: StepOptions,
    ) -> Result<Self> {
        let p = model.params();
        if p.is_empty() {
            bail!("the model has no parameters");
        }
        let device = p.var(0).device().clone();
        let core = core::Core::new(strategy, AdamW::new(cfg)?, opts, &device)?;
        // Why no graph at all (the step's, validation's): not asked for, or no CUDA.
        let no_graph = match (opts.graph, device.is_cuda()) {
            (false, _) => Some("not asked for (graph off)".to_string()),
            (_, false) => Some("not a CUDA device".to_string()),
            _ => None,
        };
        let graph = match (&no_graph, core.uncapturable()) {
            (Some(why), _) => Graph::Off(why.clone()),
            // The step may be uncapturable (its optimizer); a forward is not.
            (None, Some(why)) => Graph::Off(why),
            (None, None) => Graph::Wanted,
        };
        let cache = matches!(graph, Graph::Wanted).then(|| seam::graph::HtodCache::enable(&device));
        Ok(Self {
            slots: slots::Slots::new(&device)?,
            core,
            device,
            graph,
            pending: None,
            eager_steps: 0,
            no_graph,
            eval: None,
            stop: None,
            _cache: cache,
        })
    }

    /// Queues one optimizer step on `micro` (this rank's micro-batches; host tensors are
    /// uploaded through pinned memory) at learning rate `lr`, and returns the previous
    /// step's values (read while this one runs). Nothing else waits for the device.
    pub fn step(
        &mut self,
        model: &dyn StagedModel,
        micro: &[Batch],
        lr: f64,
    ) -> Result<Option<StepOut>> {
        if micro.is_empty() {
            bail!("a step needs at least one micro-batch");
        }
        if !(lr.is_finite() && lr >= 0.0) {
            bail!("learning rate {lr}: a finite rate >= 0");
        }
        for b in micro {
            model.check_batch(b)?;
        }
        self.core.set_lr(lr);
        let flag = self.stop.as_mut().map(|s| s.upload_pair()).transpose()?;
        let extra: Vec<(&Tensor, &Tensor)> = flag.iter().map(|(h, d)| (h, d)).collect();
        let batches = self
            .slots
            .upload(micro, matches!(self.graph, Graph::On(_)), &extra)?;
        if matches!(self.graph, Graph::Wanted) && self.eager_steps > 0 {
            self.core.settle()?;
            let (core, b) = (&mut self.core, batches.clone());
            let captured = seam::graph::capture(&self.device, || {
                core.compute(model, &b, true)
                    .map_err(|e| seam::ModelError::Input(format!("{e:#}")))
            });
            self.graph = match self.every_rank_captured(captured)? {
                Ok(c) => Graph::On(c),
                Err(why) => Graph::Off(why),
            };
        }
        let out = match &self.graph {
            Graph::On(c) => {
                self.core.advance_for_replay()?;
                c.replay().context("the captured training step's replay")?;
                if let Some(comm) = self.core.comm() {
                    // The replay's collectives were captured, not launched one by one:
                    // the watchdog watches the replay as a whole.
                    comm.watch_queued("a training step's CUDA graph replay")?;
                }
                c.outputs().clone()
            }
            _ => {
                self.eager_steps += 1;
                let when = match self.graph {
                    Graph::Wanted => "the eager training step before the capture",
                    _ => "an eager training step",
                };
                self.core.compute(model, &batches, false).context(when)?
            }
        };
        let out = match &self.stop {
            Some(s) => s.append(&out, self.core.comm())?,
            None => out,
        };
        let ticket = self.slots.download(&out)?;
        let prev = self.pending.replace(ticket);
        prev.map(|t| self.read(t)).transpose()
    }

    /// Whether every rank captured its step: a graph replays its collectives only if every
    /// rank replays the same graph, so one rank's failure makes all run eager (saying which
    /// failed). One eager all-reduce of one flag, once.
    fn every_rank_captured(
        &self,
        mine: std::result::Result<seam::graph::CapturedStep<Tensor>, String>,
    ) -> Result<std::result::Result<seam::graph::CapturedStep<Tensor>, String>> {
        let mine = mine.map_err(|why| format!("capture failed: {why}"));
        let Some(comm) = self.core.comm().filter(|c| c.world_size() > 1) else {
            return Ok(mine);
        };
        let flag = Tensor::new(&[f32::from(u8::from(mine.is_ok()))], &self.device)?;
        comm.all_reduce(&flag, comm::ReduceOp::Min)?;
        let all = flag.to_vec1::<f32>()?[0] == 1.0;
        Ok(match (mine, all) {
            (Ok(c), true) => Ok(c),
            (Ok(_), false) => Err("capture failed on another rank: eager steps".into()),
            (Err(why), _) => Err(why),
        })
    }

    /// The last step's values (waits for it); `None` when every step was read. The
    /// model's parameters are complete afterwards (ZeRO-1's all-gathers, left in flight for
    /// the next forward, are collected): call it before reading them (evaluation, export).
    pub fn flush(&mut self) -> Result<Option<StepOut>> {
        self.core.settle()?;
        self.pending.take().map(|t| self.read(t)).transpose()
    }

    fn read(&mut self, t: slots::Ticket) -> Result<StepOut> {
        let (v, seconds) = self.slots.read(t)?;
        Ok(StepOut {
            loss: v[0] as f64,
            grad_norm: self.core.takes_norm().then_some(v[1] as f64),
            stop: v.get(2).is_some_and(|&f| f >= stop::STOP),
            checkpoint: v.get(2).is_some_and(|&f| f >= stop::CHECKPOINT),
            seconds,
        })
    }

    /// Whether the step runs as a CUDA graph, or why not.
    pub fn graph_status(&self) -> std::result::Result<(), String> {
        self.graph.status()
    }

    /// Kernel launches in one replay (when captured).
    pub fn graph_kernels(&self) -> Option<usize> {
        match &self.graph {
            Graph::On(c) => c.kernel_nodes().ok().flatten(),
            _ => None,
        }
    }

    /// The captured step's allocation nodes (when captured): what its lifetimes ask for,
    /// beside what the graph's memory holds ([`seam::graph::GraphAllocs`]).
    pub fn graph_allocs(&self) -> Option<seam::graph::GraphAllocs> {
        match &self.graph {
            Graph::On(c) => c.allocations().ok().flatten(),
            _ => None,
        }
    }

    /// Where AdamW runs in this step.
    pub fn adamw_place(&self) -> AdamwPlace {
        self.core.place()
    }

    /// Where the last step took the clipping norm (`None`: it did not clip).
    pub fn norm_taken(&self) -> Option<NormPlace> {
        self.core.norm_taken
    }

    /// The side stream's block cap and lag, where AdamW runs on one.
    pub fn side(&self) -> Option<&seam::SideStream> {
        self.core.side()
    }

    /// The replicated optimizer (unused by the sharded ones, which hold their own).
    pub fn adamw(&self) -> &AdamW {
        self.core.adamw()
    }

    /// The strategy.
    pub fn strategy(&self) -> &dyn Strategy {
        self.core.strategy.as_ref()
    }
    /// [`Strategy::release_masters`]: the model's f32 masters the strategy keeps itself.
    pub fn release_masters(&mut self, params: &mut seam::ParamSet) -> Result<usize> {
        self.core.strategy.release_masters(params)
    }
    /// The strategy as the type it was built as (a benchmark reads the Ddp's counters
    /// through it); `None` for another.
    pub fn strategy_as<T: Strategy>(&self) -> Option<&T> {
        self.core.strategy.as_any().downcast_ref()
    }
    pub fn strategy_as_mut<T: Strategy>(&mut self) -> Option<&mut T> {
        self.core.strategy.as_any_mut().downcast_mut()
    }

    /// The device the step runs on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// `probe` runs in every eager step right before the optimizer update, after the
    /// gradients are synchronised (`bench zero1` reads the memory in use there); not
    /// where AdamW runs inside the backward, nor in a captured step.
    pub fn set_probe(&mut self, probe: Option<Box<dyn FnMut()>>) {
        self.core.probe = probe;
    }
}

impl TrainStep {
    /// Drops a captured graph: the next step runs eager and captures again.
    fn recapture(&mut self) {
        if matches!(self.graph, Graph::On(_)) {
            self.graph = Graph::Wanted;
            self.eager_steps = 0;
            seam::graph::trim(&self.device);
        }
    }
}

impl Drop for TrainStep {
    fn drop(&mut self) {
        // The graphs' memory goes back once nothing replays them.
        if matches!(self.graph, Graph::On(_)) || self.eval_graph_on() {
            self.graph = Graph::Off("dropped".into());
            self.eval = None;
            seam::graph::trim(&self.device);
        }
    }
}

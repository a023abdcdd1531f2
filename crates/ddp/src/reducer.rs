//! `Ddp`: runs a model's staged backward and averages its gradients across ranks with one
//! of the [`Strategy`](crate::Strategy)s.
//!
//! Buckets ([`crate::buckets`]) are the unit of communication. Eager strategies launch a
//! bucket's all-reduce (asynchronous, on the communication stream) from the stage
//! callback of `seam::forward_backward` as soon as its last gradient is final; the others
//! launch every bucket after backward. A bucket's large gradients already in the
//! communication dtype are reduced in place (one group of collectives per bucket); the
//! others are first copied (and cast) into one flat buffer; a bf16 model's bf16 gradients
//! need no cast. Gradients come back as views of those buffers, in that dtype, from
//! [`Ddp::finish_gradient_synchronization`], or bucket by bucket inside the backward
//! ([`Ddp::forward_backward_reduced`], for AdamW there). A launched bucket's gradients are
//! taken out of the backward's gradient list, so each lives once.
//!
//! With `reduce_scatter` (ZeRO-1, the zero1 crate) every bucket is zero-padded to a multiple
//! of the world size and reduce-scattered instead: rank r receives the averaged r-th slice
//! of each bucket, collected by [`Ddp::finish_reduce_scatter`].

use crate::buckets::{self, Bucket, ParamInfo};
use crate::consistency;
use crate::error::{DdpError, Result};
pub use crate::launch::REDUCE_LAG;
use crate::launch::{count, launch_all, InFlight};
pub use crate::options::DdpOptions;
use candle_core::{DType, Device, Shape, Tensor};
use comm::Communicator;
use seam::{Batch, Grads, StagedModel};
use std::sync::Arc;

/// Counters of the last synchronised step.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SyncStats {
    pub collectives: usize,
    /// Launches (collectives coalesced into one count once).
    pub launches: usize,
    pub bytes: usize,
    /// Collectives launched while backward was still running.
    pub launched_during_backward: usize,
}

/// This rank's part of one bucket after a reduce-scatter ([`Ddp::finish_reduce_scatter`]).
pub struct BucketShard {
    /// The slice of the flat buffer (the parameters not sharded in place, padded), f32.
    pub flat: Option<Tensor>,
    /// (parameter index, this rank's chunk of its averaged gradient), in bucket order.
    pub params: Vec<(usize, Tensor)>,
}

pub struct Ddp {
    pub(crate) comm: Arc<dyn Communicator>,
    pub(crate) opts: DdpOptions,
    pub(crate) buckets: Vec<Bucket>,
    pub(crate) shapes: Vec<Shape>,
    /// Each parameter's name and the stage DDP expects its gradient from (for errors).
    pub(crate) names: Vec<(String, usize)>,
    /// Local gradients summed over `forward_backward_no_sync` calls (seam::accum: f32
    /// sums, made in place), and how many.
    pub(crate) accumulated: seam::accum::Accumulator,
    pub(crate) micro_batches: usize,
    /// What the gradients in flight are multiplied by when collected (1/micro-batches).
    pub(crate) scale: Option<f64>,
    pub(crate) in_flight: Vec<InFlight>,
    /// Reduce-scatter parts collected during the backward (release_gradients), by bucket.
    pub(crate) early: Vec<(usize, BucketShard)>,
    /// Split all-reduce: the gathers' grouping, and the gather buffers that the gradients
    /// reduced in place are summed into (ddp::split).
    pub(crate) split_setup: crate::split::SplitSetup,
    pub(crate) squares: Option<crate::squares::Squares>,
    /// Stage 0's gradients from every rank's rows (`ddp::rows`), and the last step's.
    pub(crate) rows: Option<crate::rows::Rows>,
    pub(crate) local: Vec<(usize, Tensor)>,
    /// Whether reduce-scatter launches go deferred (`crate::scatter::deferred`).
    pub(crate) deferred: bool,
    stats: SyncStats,
    pub(crate) stage_hook: Option<StageHook>,
    pub(crate) device: Device,
}

/// Takes a launch's averaged gradients by parameter index ([`Ddp::forward_backward_reduced`]).
type Reduced<'a> = dyn FnMut(Vec<(usize, Tensor)>) -> Result<()> + 'a;

/// Called with each stage's index as soon as its backward has been queued, before the
/// stage's buckets are launched (a profiler's place to mark the compute stream).
pub type StageHook = Box<dyn FnMut(usize) -> comm::Result<()> + Send>;

impl Ddp {
    /// Checks that every rank has the same model and options (fails on every rank,
    /// naming the rank that differs), then copies rank 0's parameters to all ranks.
    pub fn new(
        comm: Arc<dyn Communicator>,
        model: &dyn StagedModel,
        opts: DdpOptions,
    ) -> Result<Self> {
        let p = model.params();
        if p.is_empty() {
            return Err(DdpError::Input("the model has no parameters".into()));
        }
        let device = p.var(0).device().clone();
        // Checked here, reported after every rank has compared notes: a rank with bad
        // options fails with its own reason, the others name it (instead of waiting for
        // it in the comparison until the timeout).
        let opts = crate::rows::resolved(crate::tail::resolved(opts)?)?;
        let local = opts
            .check(&device)
            .and_then(|()| crate::buckets::ready_stages(model));
        let ready = consistency::check_same_everywhere(
            comm.as_ref(),
            model,
            &device,
            opts.strategy.code(),
            opts.grad_dtype,
            opts.gradient_options_code(),
            local,
        )?;
        // Stage 0's parameters taken from rows (ddp::rows) go in buckets of their own.
        let rows = crate::rows::plan(model, &opts, comm.world_size());
        let infos: Vec<ParamInfo> = (p.vars().iter().zip(&ready).enumerate())
            .map(|(i, (v, &r))| ParamInfo {
                numel: v.elem_count(),
                ready_stage: r,
                alone: rows.as_ref().is_some_and(|r| r.params.contains(&i)),
            })
            .collect();
        let elem_bytes = opts.grad_dtype.unwrap_or(DType::F32).size_in_bytes();
        consistency::broadcast_params(comm.as_ref(), model)?;
        let mut plan = buckets::plan(opts.strategy, &infos, elem_bytes);
        if let Some(mb) = opts.last_bucket_mb.filter(|&mb| mb > 0.0) {
            plan = buckets::last_apart(plan, &infos, mb, elem_bytes);
        }
        let mut d = Self {
            buckets: plan,
            shapes: p.vars().iter().map(|v| v.shape().clone()).collect(),
            names: p
                .names()
                .iter()
                .cloned()
                .zip(ready.iter().copied())
                .collect(),
            deferred: crate::scatter::deferred(comm.as_ref(), &opts)?,
            comm,
            opts,
            accumulated: Default::default(),
            micro_batches: 0,
            scale: None,
            in_flight: Vec::new(),
            early: Vec::new(),
            split_setup: Default::default(),
            squares: None,
            rows,
            local: Vec::new(),
            stats: SyncStats::default(),
            stage_hook: None,
            device,
        };
        (d.split_setup, d.squares) = (d.split_setup()?, d.squares()?);
        Ok(d)
    }

    /// Installs (or with `None` removes) the [`StageHook`] run in every staged backward.
    pub fn set_stage_hook(&mut self, hook: Option<StageHook>) {
        self.stage_hook = hook;
    }

    pub fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }
    pub fn comm(&self) -> &dyn Communicator {
        self.comm.as_ref()
    }
    pub fn last_stats(&self) -> SyncStats {
        self.stats
    }

    /// Forward and backward on this rank's batch; returns this rank's loss (f32 scalar
    /// tensor). Gradients are averaged across ranks (launched now, collected by
    /// [`Self::finish_gradient_synchronization`]). Adds the gradients accumulated by
    /// earlier `forward_backward_no_sync` calls.
    pub fn forward_backward(&mut self, model: &dyn StagedModel, batch: &Batch) -> Result<Tensor> {
        self.forward_backward_with(model, batch, |_| Ok(()))
    }

    /// [`Self::forward_backward`] with `before_stage(s)` run right before forward stage `s`
    /// is queued (ZeRO makes the compute stream wait there for its all-gathered parameters).
    pub fn forward_backward_with(
        &mut self,
        model: &dyn StagedModel,
        batch: &Batch,
        before_stage: impl FnMut(usize) -> Result<()>,
    ) -> Result<Tensor> {
        let observe = |_: usize, _: &Grads| Ok(());
        Ok(self
            .forward_backward_observed(model, batch, before_stage, observe)?
            .0)
    }

    /// [`Self::forward_backward_with`], with `observe(s, grads)` run in stage `s`'s backward
    /// (before its buckets take the gradients) wherever the gradients there are already the
    /// synchronised ones: on one rank, with no accumulated micro-batch, in a dtype the wire
    /// carries exactly. Returns the loss and whether `observe` saw every stage's final
    /// gradients (a clipping norm can then be taken during the backward); if not, read the
    /// gradients after the synchronisation.
    pub fn forward_backward_observed(
        &mut self,
        model: &dyn StagedModel,
        batch: &Batch,
        before_stage: impl FnMut(usize) -> Result<()>,
        observe: impl FnMut(usize, &Grads) -> Result<()>,
    ) -> Result<(Tensor, bool)> {
        self.run(model, batch, before_stage, observe, None)
    }

    /// [`Self::forward_backward`] for an optimizer inside the backward (PyTorch's
    /// optimizer-in-backward behind DDP's communication hook): `reduced(grads)` gets each
    /// launch's averaged gradients, by parameter index, each parameter once and final, as
    /// soon as the compute stream is made to wait for them: [`REDUCE_LAG`] stages after the
    /// launch (at once on one rank, where nothing is sent), the rest after the backward.
    /// Nothing is left for [`Self::finish_gradient_synchronization`]. Not in
    /// reduce-scatter mode.
    pub fn forward_backward_reduced(
        &mut self,
        model: &dyn StagedModel,
        batch: &Batch,
        mut reduced: impl FnMut(Vec<(usize, Tensor)>) -> Result<()>,
    ) -> Result<Tensor> {
        if self.scatters() {
            return Err(DdpError::Input(
                "forward_backward_reduced: this Ddp reduce-scatters (ZeRO-1 steps its shards; a split all-reduce gathers after the backward)"
                    .into(),
            ));
        }
        let observe = |_: usize, _: &Grads| Ok(());
        let r = self.run(model, batch, |_| Ok(()), observe, Some(&mut reduced));
        self.scale = None;
        Ok(r?.0)
    }

    fn run(
        &mut self,
        model: &dyn StagedModel,
        batch: &Batch,
        before_stage: impl FnMut(usize) -> Result<()>,
        mut observe: impl FnMut(usize, &Grads) -> Result<()>,
        mut reduced: Option<&mut Reduced<'_>>,
    ) -> Result<(Tensor, bool)> {
        self.expect_idle("forward_backward")?;
        self.stats = SyncStats::default();
        self.squares_begin();
        let eager = self.opts.strategy.eager();
        let (mut launched, mut stats, mut during) =
            (Vec::<InFlight>::new(), SyncStats::default(), 0);
        let ids = self.rows_begin(batch, self.micro_batches > 0)?;
        let tape = seam::forward_with(model, batch, before_stage)?;
        let loss = tape.loss().clone();
        let acc = Some(self.accumulated.take()?).filter(|a| !a.is_empty());
        let micro = std::mem::take(&mut self.micro_batches) + 1;
        self.scale = (micro > 1 && !self.opts.sum_micro_batches).then(|| 1.0 / micro as f64);
        // With accumulated micro-batches the averaging factor goes into the pass that adds
        // the last one (seam::accum), not into a pass over the reduced gradients.
        let fold = acc.is_some().then(|| self.scale.take()).flatten();
        let acc = acc.as_ref().map(|a| (a, fold));
        let wire = self.opts.grad_dtype.unwrap_or(DType::F32);
        let mut observing = self.comm.world_size() == 1 && acc.is_none() && micro == 1;
        let lag = if self.comm.world_size() == 1 {
            0
        } else {
            REDUCE_LAG
        };
        let mut hook = self.stage_hook.take();
        let carve = if eager { self.opts.gemm_sm_carveout } else { 0 };
        if carve > 0 {
            seam::gemm_sms::set_gemm_sm_carveout(&self.device, carve)?;
        }
        let this = &*self;
        // Releasing (ZeRO-2): reduce-scatter parts collected during the backward, the rest
        // left for finish_reduce_scatter.
        let release = this.opts.reduce_scatter && this.opts.release_gradients;
        let mut early = Vec::new();
        // Collects (and hands to `reduced`, or keeps as shards) the launches made at stage
        // `s + lag` or before.
        let mut drain = |launched: &mut Vec<InFlight>, s: Option<usize>| -> Result<()> {
            if reduced.is_none() && (!release || s.is_none()) {
                return Ok(());
            }
            let due = |l: &InFlight| match (s, l.stage) {
                (Some(s), Some(t)) => t >= s + lag,
                _ => true,
            };
            while let Some(k) = launched.iter().position(due) {
                count(&mut stats, &launched[k]);
                let l = launched.remove(k);
                match reduced.as_mut() {
                    Some(f) => f(l.collect(this, this.scale)?)?,
                    None => early.extend(this.shards_of(l, this.scale)?),
                }
            }
            Ok(())
        };
        let from_rows = ids.is_some();
        let on_stage = |s, grads: &mut Grads| -> Result<()> {
            if let Some(h) = hook.as_mut() {
                h(s)?;
            }
            // f32 on the wire holds every gradient dtype exactly; another only its own. On
            // one rank a contiguous gradient is reduced as it is (launch::prepare).
            observing &= wire == DType::F32
                || grads
                    .iter()
                    .flatten()
                    .all(|g| g.dtype() == wire || g.is_contiguous());
            if observing {
                observe(s, grads)?;
            }
            if eager {
                let ready: Vec<usize> = (0..this.buckets.len())
                    .filter(|&b| this.buckets[b].ready_stage == s)
                    .collect();
                during += ready.len();
                launch_all(this, (&ready, Some(s)), grads, acc, &mut launched)?;
                drain(&mut launched, Some(s))?;
            }
            Ok(())
        };
        // Stage 0 from every rank's rows (ddp::rows): its backward left to rows_gradients.
        let mut local = Vec::new();
        let result = match ids {
            None => tape.backward(on_stage),
            Some(ids) => (tape.backward_to(1, on_stage)).and_then(|(grads, up)| {
                local = this.rows_gradients(model, ids, up)?;
                Ok(grads)
            }),
        };
        if carve > 0 {
            seam::gemm_sms::set_gemm_sm_carveout(&self.device, 0)?;
        }
        let rest = result.and_then(|mut grads| {
            if let Some(h) = hook.as_mut().filter(|_| from_rows) {
                h(0)?;
            }
            if !eager {
                let all: Vec<usize> = (0..this.buckets.len())
                    .filter(|&b| !(from_rows && this.rows_bucket(b)))
                    .collect();
                launch_all(this, (&all, None), &mut grads, acc, &mut launched)?;
            }
            drain(&mut launched, None)
        });
        self.stage_hook = hook;
        rest?;
        match reduced.as_mut() {
            Some(f) if !local.is_empty() => f(std::mem::take(&mut local))?,
            _ => self.local = local,
        }
        self.early = early;
        for f in &launched {
            count(&mut stats, f);
        }
        stats.launched_during_backward = during;
        self.stats = stats;
        self.in_flight = launched;
        Ok((loss, observing))
    }

    /// Averages gradients computed elsewhere (no backward here): launches every bucket
    /// and collects them. Benchmarks use it to time communication alone.
    pub fn synchronize_grads(&mut self, grads: &Grads) -> Result<Grads> {
        self.expect_idle("synchronize_grads")?;
        let mut launched = Vec::with_capacity(self.buckets.len());
        let mut grads = grads.clone();
        let all: Vec<usize> = (0..self.buckets.len()).collect();
        launch_all(self, (&all, None), &mut grads, None, &mut launched)?;
        self.in_flight = launched;
        self.finish_gradient_synchronization()
    }

    pub(crate) fn expect_idle(&self, what: &str) -> Result<()> {
        if self.in_flight.is_empty() && self.early.is_empty() && self.local.is_empty() {
            Ok(())
        } else {
            Err(DdpError::Input(format!(
                "{what} called while the previous step's gradients are still in flight; call finish_gradient_synchronization first"
            )))
        }
    }
}

//! The step's arithmetic, queued without a host round trip: micro-batches, gradient
//! synchronisation, the loss, the norm and clipping coefficient, AdamW. The same code runs
//! eagerly and inside a CUDA graph capture.

use crate::{AdamwPlace, NormPlace, StepOptions};
use anyhow::{anyhow, Result};
use candle_core::{DType, Device, Tensor};
use comm::ReduceOp;
use ddp::Ddp;
use seam::{AdamW, Batch, Grads, InBackward, SideStream, StagedModel, StagedNorm};
use zero1::{ShardedOptimizer, Zero1Overlap};

/// How gradients are synchronised across ranks.
pub enum Sync {
    /// One rank: no communication.
    Local,
    /// Averaged by `ddp` (any strategy); AdamW on every rank.
    Ddp(Box<Ddp>),
    /// Averaged by `ddp`, then the sharded optimizer (AdamW state split over the ranks,
    /// owners broadcast the updated parameters).
    Sharded(Box<Ddp>, Box<ShardedOptimizer>),
    /// ZeRO-1 (`zero1::Zero1Overlap`): buckets reduce-scattered during the backward, AdamW
    /// on this rank's slices (its own optimizer), every bucket all-gathered back.
    Zero1(Box<Zero1Overlap>),
}

pub struct Core {
    pub sync: Sync,
    opt: AdamW,
    clip: f64,
    /// Take the norm even without clipping, so that AdamW skips a step whose gradients are
    /// not finite (StepOptions::skip_nonfinite).
    skip: bool,
    /// The place when inside the backward is exact (one micro-batch).
    place: AdamwPlace,
    side: Option<SideStream>,
    /// Where a clipping step takes the norm, and its stream where that is a second one.
    norm: NormPlace,
    norm_side: Option<SideStream>,
    /// Where the last step took the norm (`None`: it took none).
    pub norm_taken: Option<NormPlace>,
    /// Called in an eager step right before the optimizer update (a benchmark reads the
    /// memory in use there); not called where AdamW ran inside the backward, which has no
    /// such point.
    pub probe: Option<Box<dyn FnMut()>>,
}

impl Core {
    pub fn new(sync: Sync, opt: AdamW, o: StepOptions, device: &Device) -> Result<Self> {
        if !(o.clip.is_finite() && o.clip >= 0.0) {
            anyhow::bail!("clip: {} (a finite norm >= 0; 0: no clipping)", o.clip);
        }
        if o.skip_nonfinite && matches!(sync, Sync::Sharded(..)) {
            anyhow::bail!(
                "skipping non-finite steps: not with the sharded optimizer (its owners' updates \
                 are broadcast); use ZeRO-1 (Sync::Zero1)"
            );
        }
        // Inside the backward is exact without clipping: on one process, and with DDP once
        // each bucket is reduced (ZeRO-1 steps shards after its reduce-scatters).
        let exact =
            o.clip == 0.0 && !o.skip_nonfinite && matches!(sync, Sync::Local | Sync::Ddp(_));
        let place = o
            .adamw
            .or_env()?
            .resolve(exact, device.is_cuda() && o.fp32_simt);
        let side = if place == AdamwPlace::SideStream {
            let s = SideStream::new(device).map_err(|e| anyhow!("--adamw side-stream: {e}"))?;
            Some(s.with_max_blocks(Some(o.side_blocks)).with_lag(o.side_lag))
        } else {
            None
        };
        let norm = o.norm.or_env()?;
        let norm_side = match (norm, device.is_cuda()) {
            (NormPlace::SideStream, true) => {
                Some(SideStream::new(device).map_err(|e| anyhow!("norm on a side stream: {e}"))?)
            }
            _ => None,
        };
        Ok(Self {
            sync,
            opt,
            clip: o.clip,
            skip: o.skip_nonfinite,
            place,
            side,
            norm,
            norm_side,
            norm_taken: None,
            probe: None,
        })
    }

    /// The ranks' communicator (`None` on one rank without one).
    pub fn comm(&self) -> Option<&dyn comm::Communicator> {
        match &self.sync {
            Sync::Local => None,
            Sync::Ddp(d) | Sync::Sharded(d, _) => Some(d.comm()),
            Sync::Zero1(z) => Some(z.ddp().comm()),
        }
    }

    /// Why this step cannot be captured as a CUDA graph, if it cannot.
    pub fn uncapturable(&self) -> Option<String> {
        match self.sync {
            Sync::Sharded(..) => Some(
                "the sharded optimizer's AdamW scalars are not uploaded per replay: eager steps"
                    .into(),
            ),
            _ => None,
        }
    }

    /// Completes what an eager step leaves in flight (ZeRO-1's all-gathers ahead of the next
    /// forward): before the parameters are read, and before a capture, which must not
    /// wait on uncaptured work.
    pub fn settle(&mut self) -> Result<()> {
        if let Sync::Zero1(z) = &mut self.sync {
            z.sync_params()?;
        }
        Ok(())
    }

    pub fn set_lr(&mut self, lr: f64) {
        self.opt.cfg.lr = lr;
        match &mut self.sync {
            Sync::Sharded(_, o) => o.set_lr(lr),
            Sync::Zero1(z) => z.optimizer_mut().cfg.lr = lr,
            _ => {}
        }
    }

    pub fn advance_for_replay(&mut self) -> Result<()> {
        match &mut self.sync {
            Sync::Zero1(z) => {
                z.optimizer_mut().advance_for_replay()?;
                z.replayed(); // the replay's AdamW leaves stale what its host code would mark
            }
            _ => self.opt.advance_for_replay()?,
        }
        Ok(())
    }

    pub fn place(&self) -> AdamwPlace {
        self.place
    }
    pub fn side(&self) -> Option<&SideStream> {
        self.side.as_ref()
    }
    pub fn adamw(&self) -> &AdamW {
        &self.opt
    }

    pub fn sync_and_adamw_mut(&mut self) -> (&mut Sync, &mut AdamW) {
        (&mut self.sync, &mut self.opt)
    }

    /// Whether the step takes the gradient norm: to clip by it (AdamW after the backward).
    /// Without clipping nothing needs it, and it would cost a pass over every gradient.
    pub fn takes_norm(&self) -> bool {
        self.place == AdamwPlace::After && (self.clip > 0.0 || self.skip)
    }

    /// Queues one step on `batches`; returns `[loss, norm]` (f32, on the device; the norm is
    /// NaN where AdamW ran inside the backward). `capturing`: inside a graph capture, where
    /// nothing may stay in flight past the step (ZeRO-1's all-gathers are collected).
    pub fn compute(
        &mut self,
        model: &dyn StagedModel,
        batches: &[Batch],
        capturing: bool,
    ) -> Result<Tensor> {
        let k = batches.len();
        // AdamW runs inside the backward: on one process with one micro-batch, and with DDP
        // once each bucket is reduced (the first two arms below).
        let in_backward = self.place != AdamwPlace::After
            && match &self.sync {
                Sync::Local => k == 1,
                Sync::Ddp(_) => true,
                _ => false,
            };
        // The norm summed inside the backward, where the gradients are final there (else
        // dropped below, and taken after).
        let mut staged = match self.takes_norm() && k == 1 && self.norm != NormPlace::After {
            true => Some(StagedNorm::new(model, self.norm_side.as_ref())?),
            false => None,
        };
        let mut observe = |s: usize, g: &Grads| match staged.as_mut() {
            Some(n) => n.stage(s, g),
            None => Ok(()),
        };
        // The bf16 copies fresh now are fresh for every micro-batch: nothing writes a
        // master before AdamW, so later forwards read them instead of casting again.
        let shadows = model.params().bf16_shadows();
        let (loss, grads, seen) = match &mut self.sync {
            Sync::Local if in_backward => {
                let tape = seam::forward(model, &batches[0])?;
                let loss = tape.loss().clone();
                let mut ib = InBackward::begin(&mut self.opt, model.params(), self.side.as_ref())?;
                tape.backward(|s, g| ib.stage(&model.stage_params(s), g))?;
                ib.finish()?;
                (loss, None, false)
            }
            Sync::Ddp(d) if in_backward => {
                let mut ib = InBackward::begin(&mut self.opt, model.params(), self.side.as_ref())?;
                let loss = summed(batches, shadows, |b, last| match last {
                    false => Ok(d.forward_backward_no_sync(model, b)?),
                    true => Ok(d.forward_backward_reduced(model, b, |g| Ok(ib.update(g)?))?),
                })?;
                ib.finish()?;
                (loss, None, false)
            }
            Sync::Local => {
                // One micro-batch: its gradients as they are (AdamW reads bf16). More: f32
                // sums in place, the weight gradients' in their GEMMs, the last micro-batch
                // averaging (seam::accum).
                let (mut one, mut sum) = (None, seam::accum::Accumulator::default());
                let loss = summed(batches, shadows, |b, last| match k {
                    1 => {
                        let (l, g) = seam::forward_backward(model, b, |s, g| observe(s, g))?;
                        one = Some(g);
                        Ok(l)
                    }
                    _ => {
                        let scale = last.then_some(1.0 / k as f64);
                        let obs = |s: usize, g: &mut Grads| observe(s, g);
                        Ok(seam::forward_backward_into(model, b, &mut sum, scale, obs)?)
                    }
                })?;
                let g = match one {
                    Some(g) => g,
                    None => sum.take()?,
                };
                (loss, Some(g), true)
            }
            Sync::Zero1(z) => {
                let mut seen = false;
                let loss = summed(batches, shadows, |b, last| match last {
                    false => Ok(z.forward_backward_no_sync(model, b)?),
                    true => {
                        let obs = |s: usize, g: &Grads| Ok(observe(s, g)?);
                        let (l, all) = z.forward_backward_observed(model, b, obs)?;
                        seen = all;
                        Ok(l)
                    }
                })?;
                (loss, None, seen)
            }
            Sync::Ddp(d) | Sync::Sharded(d, _) => {
                let mut seen = false;
                let loss = summed(batches, shadows, |b, last| match last {
                    false => Ok(d.forward_backward_no_sync(model, b)?),
                    true => {
                        let obs = |s: usize, g: &Grads| Ok(observe(s, g)?);
                        let (l, all) = d.forward_backward_observed(model, b, |_| Ok(()), obs)?;
                        seen = all;
                        Ok(l)
                    }
                })?;
                (loss, Some(d.finish_gradient_synchronization()?), seen)
            }
        };
        let staged = staged.filter(|_| seen);
        self.norm_taken = match (&staged, self.takes_norm()) {
            (_, false) => None,
            (Some(_), true) => Some(self.norm),
            (None, true) => Some(NormPlace::After),
        };
        let mut loss = loss.to_dtype(DType::F32)?.reshape(1)?;
        if k > 1 {
            loss = loss.affine(1.0 / k as f64, 0.0)?;
        }
        if let Some(c) = self.comm().filter(|c| c.world_size() > 1) {
            c.all_reduce(&loss, ReduceOp::Avg)?;
        }
        // Where no norm is taken, NaN stands in (made on the device: a host upload cannot
        // be captured).
        let no_norm = || loss.affine(0.0, f64::NAN);
        if let Some(p) = self.probe.as_mut().filter(|_| !capturing && !in_backward) {
            p();
        }
        let clip = self.takes_norm().then_some(self.clip);
        if let Sync::Zero1(z) = &mut self.sync {
            let nc = zero1_step(z, clip, staged, model.params().bf16_shadows())?;
            if capturing {
                z.complete_gathers()?;
            }
            let norm = nc.map_or_else(no_norm, |nc| nc.narrow(0, 0, 1))?;
            return Ok(Tensor::cat(&[&loss, &norm], 0)?);
        }
        let Some(g) = grads else {
            return Ok(Tensor::cat(&[&loss, &no_norm()?], 0)?);
        };
        if !self.takes_norm() {
            match &mut self.sync {
                Sync::Sharded(_, o) => o.step(model.params().vars(), &g)?,
                _ => self.opt.step_params(model.params(), &g)?,
            }
            return Ok(Tensor::cat(&[&loss, &no_norm()?], 0)?);
        }
        let nc = match staged {
            Some(n) => n.finish(self.clip)?,
            None => seam::clip::norm_and_coef(&g, self.clip)?,
        };
        match &mut self.sync {
            Sync::Sharded(_, o) => {
                o.step(model.params().vars(), &seam::clip::scale(&g, &nc)?)?;
            }
            Sync::Zero1(_) => unreachable!("stepped above"),
            _ => {
                self.opt.set_grad_scale(Some(nc.clone()));
                self.opt.step_params(model.params(), &g)?;
            }
        }
        Ok(Tensor::cat(&[&loss, &nc.narrow(0, 0, 1)?], 0)?)
    }
}

/// ZeRO-1's update: where the step takes the norm (`clip` given: clipping at it, or 0 to skip
/// non-finite steps only), the global norm from every rank's slices (their sums of squares
/// all-reduced; or `staged`, taken in the backward on one rank); AdamW on this rank's
/// slices scaled by the coefficient, the buckets all-gathered. Returns `[norm, coef]` where
/// it took the norm.
fn zero1_step(
    z: &mut Zero1Overlap,
    clip: Option<f64>,
    staged: Option<StagedNorm>,
    shadows: &seam::shadow::Bf16Shadows,
) -> Result<Option<Tensor>> {
    let shards = z.reduced_shards()?;
    let shadows = Some(shadows).filter(|s| s.enabled());
    let Some(clip) = clip else {
        z.optimizer_mut().set_grad_scale(None);
        z.step_on(shards, shadows)?;
        return Ok(None);
    };
    let nc = match staged {
        Some(n) => n.finish(clip)?,
        None => global_norm_and_coef(z, &shards, clip)?,
    };
    z.optimizer_mut().set_grad_scale(Some(nc.clone()));
    z.step_on(shards, shadows)?;
    Ok(Some(nc))
}

/// `[norm, coef]` of every rank's slices: their sums of squares all-reduced. On one rank
/// its slices are every gradient (in parameter order: `Zero1Overlap::shard_grads`), and
/// their `[norm, coef]` is the global one, with one process's bits.
fn global_norm_and_coef(
    z: &Zero1Overlap,
    shards: &[ddp::BucketShard],
    clip: f64,
) -> Result<Tensor> {
    let grads = Zero1Overlap::shard_grads(shards);
    let comm = z.ddp().comm();
    if comm.world_size() == 1 {
        return Ok(seam::clip::norm_and_coef(&grads, clip)?);
    }
    let mine = seam::clip::norm_and_coef(&grads, 0.0)?;
    let sumsq = mine.narrow(0, 0, 1)?.sqr()?;
    comm.all_reduce(&sumsq, ReduceOp::Sum)?;
    let norm = sumsq.sqrt()?;
    // clip / (norm + 1e-6), at most 1, as seam::clip takes it (1 without clipping) ...
    let coef = match clip > 0.0 {
        true => norm
            .affine(1.0, 1e-6)?
            .recip()?
            .affine(clip, 0.0)?
            .minimum(1f64)?,
        false => norm.ones_like()?,
    };
    // ... and NaN where the norm is not finite, so that AdamW skips the step (0·norm is 0,
    // or NaN for an inf or NaN norm).
    let coef = (coef + norm.affine(0.0, 0.0)?)?;
    Ok(Tensor::cat(&[&norm, &coef], 0)?)
}

/// The losses of `f` on every micro-batch, summed on the device; `f(b, last)` is told
/// whether `b` is the last (the one whose backward synchronises). The bf16 copies fresh
/// before the first are fresh again before each later one (`shadows`: the model's).
fn summed(
    batches: &[Batch],
    shadows: &seam::shadow::Bf16Shadows,
    mut f: impl FnMut(&Batch, bool) -> Result<Tensor>,
) -> Result<Tensor> {
    let mut loss: Option<Tensor> = None;
    let fresh = match batches.len() {
        1 => Vec::new(),
        _ => shadows.fresh_mask(),
    };
    for (i, b) in batches.iter().enumerate() {
        if i > 0 {
            shadows.restore_fresh(&fresh);
        }
        let l = f(b, i + 1 == batches.len())?;
        loss = Some(match loss {
            None => l,
            Some(a) => (a + l)?,
        });
    }
    loss.ok_or_else(|| anyhow!("a step needs at least one micro-batch"))
}

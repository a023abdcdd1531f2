//! The step's arithmetic, queued without a host round trip: micro-batches, gradient
//! synchronisation, the loss, the norm and clipping coefficient, AdamW. The same code runs
//! eagerly and inside a CUDA graph capture.

use crate::strategy::{Backward, Pass, Strategy, Update};
use crate::{AdamwPlace, NormPlace, StepOptions};
use anyhow::{anyhow, Result};
use candle_core::{DType, Device, Tensor};
use comm::ReduceOp;
use seam::{AdamW, Batch, Grads, SideStream, StagedModel, StagedNorm};

pub struct Core {
    pub strategy: Box<dyn Strategy>,
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
    pub fn new(
        strategy: Box<dyn Strategy>,
        opt: AdamW,
        o: StepOptions,
        device: &Device,
    ) -> Result<Self> {
        if !(o.clip.is_finite() && o.clip >= 0.0) {
            anyhow::bail!("clip: {} (a finite norm >= 0; 0: no clipping)", o.clip);
        }
        strategy.check(&o)?;
        // Inside the backward is exact without clipping, where the strategy allows it (one
        // process, DDP once each bucket is reduced).
        let exact = o.clip == 0.0 && !o.skip_nonfinite && strategy.adamw_in_backward(1);
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
            strategy,
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
        self.strategy.comm()
    }

    /// Why this step cannot be captured as a CUDA graph, if it cannot.
    pub fn uncapturable(&self) -> Option<String> {
        self.strategy.uncapturable()
    }

    /// Completes what an eager step leaves in flight (ZeRO-1's all-gathers ahead of the next
    /// forward): before the parameters are read, and before a capture, which must not
    /// wait on uncaptured work.
    pub fn settle(&mut self) -> Result<()> {
        self.strategy.settle()
    }

    pub fn set_lr(&mut self, lr: f64) {
        self.opt.cfg.lr = lr;
        self.strategy.set_lr(lr);
    }

    pub fn advance_for_replay(&mut self) -> Result<()> {
        self.strategy.advance_for_replay(&mut self.opt)
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

    pub fn strategy_and_adamw_mut(&mut self) -> (&mut dyn Strategy, &mut AdamW) {
        (self.strategy.as_mut(), &mut self.opt)
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
        // AdamW runs inside the backward where the strategy allows it for k micro-batches.
        let in_backward = self.place != AdamwPlace::After && self.strategy.adamw_in_backward(k);
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
        // master before AdamW, so later forwards read them instead of casting again
        // (strategy::summed).
        let Backward { loss, grads, seen } = self.strategy.forward_backward(Pass {
            model,
            batches,
            in_backward,
            opt: &mut self.opt,
            side: self.side.as_ref(),
            observe: &mut observe,
        })?;
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
        if in_backward {
            return Ok(Tensor::cat(&[&loss, &no_norm()?], 0)?);
        }
        let nc = self.strategy.update(Update {
            model,
            grads,
            clip: self.takes_norm().then_some(self.clip),
            staged,
            opt: &mut self.opt,
            capturing,
        })?;
        let norm = nc.map_or_else(no_norm, |nc| nc.narrow(0, 0, 1))?;
        Ok(Tensor::cat(&[&loss, &norm], 0)?)
    }
}

//! The step's arithmetic, queued without a host round trip: micro-batches, gradient
//! synchronisation, the loss, the norm and clipping coefficient, AdamW. The same code runs
//! eagerly and inside a CUDA graph capture.

use crate::{AdamwPlace, StepOptions};
use anyhow::{anyhow, Result};
use candle_core::{DType, Device, Tensor};
use comm::ReduceOp;
use ddp::Ddp;
use seam::staged::{add_grads, grads_f32};
use seam::{AdamW, Batch, Grads, InBackward, SideStream, StagedModel};
use zero1::ShardedOptimizer;

/// How gradients are synchronised across ranks.
pub enum Sync {
    /// One rank: no communication.
    Local,
    /// Averaged by `ddp` (any strategy); AdamW on every rank.
    Ddp(Box<Ddp>),
    /// Averaged by `ddp`, then the sharded optimizer (AdamW state split over the ranks,
    /// owners broadcast the updated parameters).
    Sharded(Box<Ddp>, Box<ShardedOptimizer>),
}

pub struct Core {
    pub sync: Sync,
    opt: AdamW,
    clip: f64,
    /// The place when inside the backward is exact (one micro-batch).
    place: AdamwPlace,
    side: Option<SideStream>,
}

impl Core {
    pub fn new(sync: Sync, opt: AdamW, o: StepOptions, device: &Device) -> Result<Self> {
        if !(o.clip.is_finite() && o.clip >= 0.0) {
            anyhow::bail!("clip: {} (a finite norm >= 0; 0: no clipping)", o.clip);
        }
        let exact = o.clip == 0.0 && matches!(sync, Sync::Local);
        let place = o.adamw.resolve(exact, device.is_cuda() && o.fp32_simt);
        let side = if place == AdamwPlace::SideStream {
            let s = SideStream::new(device).map_err(|e| anyhow!("--adamw side-stream: {e}"))?;
            Some(s.with_max_blocks(Some(o.side_blocks)).with_lag(o.side_lag))
        } else {
            None
        };
        Ok(Self {
            sync,
            opt,
            clip: o.clip,
            place,
            side,
        })
    }

    /// Why this step cannot be captured as a CUDA graph, if it cannot.
    pub fn uncapturable(&self) -> Option<String> {
        match self.sync {
            Sync::Local => None,
            Sync::Ddp(_) => Some("DDP's collectives are not captured yet: eager steps".into()),
            Sync::Sharded(..) => {
                Some("the sharded optimizer is not captured yet: eager steps".into())
            }
        }
    }

    pub fn set_lr(&mut self, lr: f64) {
        self.opt.cfg.lr = lr;
        if let Sync::Sharded(_, o) = &mut self.sync {
            o.set_lr(lr);
        }
    }

    pub fn advance_for_replay(&mut self) -> Result<()> {
        Ok(self.opt.advance_for_replay()?)
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
    pub fn adamw_mut(&mut self) -> &mut AdamW {
        &mut self.opt
    }

    pub fn sync_and_adamw_mut(&mut self) -> (&mut Sync, &mut AdamW) {
        (&mut self.sync, &mut self.opt)
    }

    /// Whether the step takes the gradient norm (AdamW after the backward).
    pub fn takes_norm(&self) -> bool {
        self.place == AdamwPlace::After
    }

    /// Queues one step on `batches`; returns `[loss, norm]` (f32, on the device; the norm is
    /// NaN where AdamW ran inside the backward).
    pub fn compute(&mut self, model: &dyn StagedModel, batches: &[Batch]) -> Result<Tensor> {
        let k = batches.len();
        let (loss, grads) = match &mut self.sync {
            Sync::Local if self.place != AdamwPlace::After && k == 1 => {
                let tape = seam::forward(model, &batches[0])?;
                let loss = tape.loss().clone();
                let mut ib = InBackward::begin(&mut self.opt, model.params(), self.side.as_ref())?;
                tape.backward(|s, g| ib.stage(&model.stage_params(s), g))?;
                ib.finish()?;
                (loss, None)
            }
            Sync::Local => {
                let (mut loss, mut sum): (Option<Tensor>, Option<Grads>) = (None, None);
                for b in batches {
                    let (l, g) = seam::forward_backward(model, b, |_, _| Ok(()))?;
                    loss = Some(match loss {
                        None => l,
                        Some(a) => (a + l)?,
                    });
                    sum = Some(match sum {
                        // One micro-batch: its gradients as they are (AdamW reads bf16).
                        None if k == 1 => g,
                        None => grads_f32(g)?,
                        Some(s) => add_grads(s, grads_f32(g)?)?,
                    });
                }
                let mut g = sum.unwrap_or_default();
                if k > 1 {
                    g = g
                        .into_iter()
                        .map(|g| g.map(|g| g.affine(1.0 / k as f64, 0.0)).transpose())
                        .collect::<candle_core::Result<_>>()?;
                }
                (loss.expect("k >= 1"), Some(g))
            }
            Sync::Ddp(d) | Sync::Sharded(d, _) => {
                let (last, rest) = batches.split_last().expect("k >= 1");
                let mut loss: Option<Tensor> = None;
                for b in rest {
                    let l = d.forward_backward_no_sync(model, b)?;
                    loss = Some(match loss {
                        None => l,
                        Some(a) => (a + l)?,
                    });
                }
                let l = d.forward_backward(model, last)?;
                let loss = match loss {
                    None => l,
                    Some(a) => (a + l)?,
                };
                (loss, Some(d.finish_gradient_synchronization()?))
            }
        };
        let mut loss = loss.to_dtype(DType::F32)?.reshape(1)?;
        if k > 1 {
            loss = loss.affine(1.0 / k as f64, 0.0)?;
        }
        if let Sync::Ddp(d) | Sync::Sharded(d, _) = &self.sync {
            if d.comm().world_size() > 1 {
                d.comm().all_reduce(&loss, ReduceOp::Avg)?;
            }
        }
        let Some(g) = grads else {
            // No norm was taken. (Made on the device: a host upload cannot be captured.)
            let nan = loss.affine(0.0, f64::NAN)?;
            return Ok(Tensor::cat(&[&loss, &nan], 0)?);
        };
        let nc = seam::clip::norm_and_coef(&g, self.clip)?;
        let clipping = self.clip > 0.0;
        match &mut self.sync {
            Sync::Sharded(_, o) => {
                let g = if clipping {
                    seam::clip::scale(&g, &nc)?
                } else {
                    g
                };
                o.step(model.params().vars(), &g)?;
            }
            _ => {
                self.opt.set_grad_scale(clipping.then(|| nc.clone()));
                self.opt.step_params(model.params(), &g)?;
            }
        }
        Ok(Tensor::cat(&[&loss, &nc.narrow(0, 0, 1)?], 0)?)
    }
}

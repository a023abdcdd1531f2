//! One rank's model, its data-parallel wrapper and optimizer: a step (micro-batches,
//! gradient averaging, clipping by the global norm, AdamW at the schedule's rate), the
//! validation loss, and checkpoints through `Ddp::save` / `ShardedOptimizer::save`.
//!
//! Strategies: `single` (one rank, `seam::forward_backward`, the reference), any ddp
//! strategy (gradients all-reduced), `zero1` (ddp's all-reduce, then the optimizer state
//! sharded over the ranks: `zero1::ShardedOptimizer`). In every strategy each rank holds
//! the averaged gradients of the whole model before the step, so the global norm is
//! computed from them and is the same on every rank, with no extra collective.

use crate::config::TrainConfig;
use anyhow::{Context, Result};
use candle_core::{DType, Device, Tensor};
use comm::{Communicator, ReduceOp};
use ddp::{Ddp, DdpOptions, Strategy};
use model::TransformerLm;
use seam::{AdamW, AdamWConfig, Batch, Grads, StagedModel};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use zero1::{ParamGroup, ShardedOptimizer};

enum Opt {
    Adam(AdamW),
    Sharded(ShardedOptimizer),
}

pub struct Engine {
    pub comm: Arc<dyn Communicator>,
    pub dev: Device,
    pub model: TransformerLm,
    ddp: Ddp,
    opt: Opt,
    single: bool,
}

/// What one step reports.
pub struct StepOut {
    /// Mean training loss over the ranks' micro-batches.
    pub loss: f64,
    /// Global gradient norm before clipping.
    pub grad_norm: f64,
}

fn adamw_cfg(c: &TrainConfig) -> AdamWConfig {
    AdamWConfig {
        lr: c.lr,
        beta1: c.beta1,
        beta2: c.beta2,
        eps: 1e-8,
        weight_decay: c.weight_decay,
    }
}

impl Engine {
    pub fn new(
        comm: Arc<dyn Communicator>,
        dev: Device,
        c: &TrainConfig,
        vocab: usize,
    ) -> Result<Self> {
        let mut model = TransformerLm::new(c.model.lm_config(vocab)?, c.seed, &dev)?;
        if c.bf16 {
            model.set_compute_dtype(DType::BF16);
        }
        let strategy = match c.strategy.as_str() {
            "single" | "zero1" => Strategy::Bucketed { bucket_mb: 25.0 },
            s => s.parse()?,
        };
        let ddp = Ddp::new(comm.clone(), &model, DdpOptions::new(strategy))?;
        let opt = if c.strategy == "zero1" {
            let g = ParamGroup {
                params: model.params().vars().to_vec(),
                cfg: adamw_cfg(c),
            };
            Opt::Sharded(ShardedOptimizer::new(comm.clone(), vec![g])?)
        } else {
            Opt::Adam(AdamW::new(adamw_cfg(c))?)
        };
        Ok(Self {
            comm,
            dev,
            model,
            ddp,
            opt,
            single: c.strategy == "single",
        })
    }

    /// The mean of `x` over the ranks.
    fn mean(&self, x: f64) -> Result<f64> {
        if self.comm.world_size() == 1 {
            return Ok(x);
        }
        let t = Tensor::new(&[x], &self.dev)?;
        self.comm.all_reduce(&t, ReduceOp::Avg)?;
        Ok(t.to_device(&Device::Cpu)?.to_vec1::<f64>()?[0])
    }

    /// Gradients of this rank's micro-batches, averaged over them and over the ranks.
    fn gradients(&mut self, micro: &[Batch]) -> Result<(f64, Grads)> {
        let m = &self.model;
        let mut loss = 0f64;
        if self.single {
            let mut sum: Option<Grads> = None;
            for b in micro {
                let (l, g) = seam::forward_backward(m, b, |_, _| Ok(()))?;
                loss += l.to_scalar::<f32>()? as f64;
                let g: Grads = g
                    .into_iter()
                    .map(|g| g.map(|g| g.to_dtype(DType::F32)).transpose())
                    .collect::<candle_core::Result<_>>()?;
                sum = Some(match sum {
                    None => g,
                    Some(s) => s
                        .into_iter()
                        .zip(g)
                        .map(|(a, b)| match (a, b) {
                            (Some(a), Some(b)) => Ok(Some((a + b)?)),
                            (a, b) => Ok(a.or(b)),
                        })
                        .collect::<candle_core::Result<_>>()?,
                });
            }
            let k = micro.len() as f64;
            let g = sum
                .unwrap_or_default()
                .into_iter()
                .map(|g| g.map(|g| g.affine(1.0 / k, 0.0)).transpose())
                .collect::<candle_core::Result<_>>()?;
            return Ok((loss / k, g));
        }
        let (last, rest) = micro.split_last().context("no micro-batches")?;
        for b in rest {
            loss += self
                .ddp
                .forward_backward_no_sync(m, b)?
                .to_scalar::<f32>()? as f64;
        }
        loss += self.ddp.forward_backward(m, last)?.to_scalar::<f32>()? as f64;
        let g = self.ddp.finish_gradient_synchronization()?;
        Ok((loss / micro.len() as f64, g))
    }

    /// One optimizer step at learning rate `lr`, gradients clipped to norm `clip` (0: off).
    pub fn step(&mut self, micro: &[Batch], lr: f64, clip: f64) -> Result<StepOut> {
        let (loss, mut g) = self.gradients(micro)?;
        let grad_norm = global_norm(&g)?;
        // torch.nn.utils.clip_grad_norm_: scale by clip / (norm + 1e-6) when below 1.
        let coef = clip / (grad_norm + 1e-6);
        if clip > 0.0 && coef < 1.0 {
            g = g
                .into_iter()
                .map(|g| g.map(|g| g.affine(coef, 0.0)).transpose())
                .collect::<candle_core::Result<_>>()?;
        }
        let vars = self.model.params().vars();
        match &mut self.opt {
            Opt::Adam(o) => {
                o.cfg.lr = lr;
                o.step(vars, &g)?
            }
            Opt::Sharded(o) => {
                o.set_lr(lr);
                o.step(vars, &g)?
            }
        }
        Ok(StepOut {
            loss: self.mean(loss)?,
            grad_norm,
        })
    }

    /// Mean loss over `batches` (this rank's parts of the validation batches), over ranks.
    pub fn eval_loss(&self, batches: &[Batch]) -> Result<f64> {
        let mut s = 0f64;
        for b in batches {
            s += seam::forward(&self.model, b)?.loss().to_scalar::<f32>()? as f64;
        }
        self.mean(s / batches.len() as f64)
    }

    /// The directory holding the checkpoint's manifest inside a step directory.
    pub fn manifest_dir(&self, dir: &Path) -> PathBuf {
        match self.opt {
            Opt::Adam(_) => dir.to_path_buf(),
            Opt::Sharded(_) => dir.join("group-0"),
        }
    }

    /// Saves weights and optimizer state (collective).
    pub fn save(&self, dir: &Path) -> Result<()> {
        match &self.opt {
            Opt::Adam(o) => self.ddp.save(dir, &self.model, o)?,
            Opt::Sharded(o) => o.save(dir)?,
        }
        Ok(())
    }

    /// Loads weights and optimizer state (collective); returns the optimizer's step count.
    pub fn resume(&mut self, dir: &Path, c: &TrainConfig) -> Result<u64> {
        Ok(match &mut self.opt {
            Opt::Adam(o) => self.ddp.resume(dir, &self.model, o)?,
            Opt::Sharded(_) => {
                let g = ParamGroup {
                    params: self.model.params().vars().to_vec(),
                    cfg: adamw_cfg(c),
                };
                let s = ShardedOptimizer::resume(self.comm.clone(), vec![g], dir)?;
                let step = checkpoint::Checkpoint::open(&dir.join("group-0"))?.step();
                self.opt = Opt::Sharded(s);
                step
            }
        })
    }
}

/// √(Σ g²) over every gradient, accumulated in f64.
pub fn global_norm(g: &Grads) -> Result<f64> {
    let mut s = 0f64;
    for t in g.iter().flatten() {
        s += t
            .to_dtype(DType::F32)?
            .sqr()?
            .sum_all()?
            .to_scalar::<f32>()? as f64;
    }
    Ok(s.sqrt())
}

//! The data-parallel strategy as a plug-in: how a step's gradients are synchronised, its
//! optimizer stepped and its state saved. [`crate::TrainStep`] runs any [`Strategy`] the
//! same way and never asks which one it has (torchtitan's `train_step`, with the
//! parallelism applied as a plug-in).
//!
//! How to use: build one and hand it to the step.
//! ```ignore
//! let one: Box<dyn step::Strategy> = Box::new(step::Local);            // one rank
//! let ddp: Box<dyn step::Strategy> = Box::new(ddp::Ddp::new(comm, &m, opts)?);
//! let z: Box<dyn step::Strategy> = Box::new(zero1::Zero1Overlap::new(comm, &m, o, cfg)?);
//! let mut st = step::TrainStep::new(&m, z, adamw_cfg, step_opts)?;
//! let z: &zero1::Zero1Overlap = st.strategy_as().expect("built with it");
//! ```
//! A new strategy implements the trait where its types live (its crate depends on `step`,
//! and `step` on none of them) and is named in the caller's table of strategies (train's
//! `--strategy`): nothing in `step`, `train`'s step loop or `bench` matches on strategies.
//!
//! The built-in ones: [`Local`] (one rank, here), `ddp::Ddp` (replicated AdamW over any of
//! ddp's all-reduce strategies; `ddp::plugin`), `zero1::Sharded` (DDP plus the sharded
//! optimizer) and `zero1::Zero1Overlap` (ZeRO-1 and ZeRO-2: reduce-scatter, AdamW on the
//! shard, all-gather). They save in [`crate::format`]'s two formats, which resume each
//! other.

mod local;

pub use crate::ckpt::{resume_replicated, GROUP};
pub use local::Local;

use crate::StepOptions;
use anyhow::{anyhow, Result};
use candle_core::Tensor;
use comm::Communicator;
use seam::{AdamW, Batch, Grads, SideStream, StagedModel, StagedNorm};
use std::any::Any;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `Any` for every strategy, so that a caller can reach the type it built
/// ([`crate::TrainStep::strategy_as`]).
pub trait AsAny: Any {
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Any> AsAny for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// One data-parallel strategy. The defaults are a replicated optimizer's: the step's AdamW
/// updates every parameter, checkpoints are one replicated file.
pub trait Strategy: AsAny {
    /// The ranks' communicator (`None` on one rank without one).
    fn comm(&self) -> Option<&dyn Communicator>;

    /// Refuses step options it cannot honour, saying why.
    fn check(&self, _o: &StepOptions) -> Result<()> {
        Ok(())
    }

    /// Whether AdamW may run inside the backward of a step of `micro_batches` (exact
    /// without clipping): where each gradient is final, and the step's AdamW updates it.
    fn adamw_in_backward(&self, _micro_batches: usize) -> bool {
        false
    }

    /// Why a step with this strategy cannot be captured as a CUDA graph, if it cannot.
    fn uncapturable(&self) -> Option<String> {
        None
    }

    /// Completes what an eager step leaves in flight, before the parameters are read and
    /// before a capture (which must not wait on uncaptured work).
    fn settle(&mut self) -> Result<()> {
        Ok(())
    }

    /// The learning rate of the next step, for an optimizer of the strategy's own (the
    /// step's AdamW is set already).
    fn set_lr(&mut self, _lr: f64) {}

    /// What a replay of a captured step leaves to the host: the optimizer's step count.
    fn advance_for_replay(&mut self, opt: &mut AdamW) -> Result<()> {
        Ok(opt.advance_for_replay()?)
    }

    /// Forward and backward over the step's micro-batches, the gradients synchronised.
    fn forward_backward(&mut self, p: Pass<'_>) -> Result<Backward>;

    /// The optimizer update after the backward (not called where AdamW ran inside it);
    /// returns `[norm, coef]` where it took the norm (`u.clip` given).
    fn update(&mut self, u: Update<'_>) -> Result<Option<Tensor>> {
        replicated_update(u)
    }

    /// Lets the model drop the f32 masters the strategy keeps the value of itself (ZeRO's
    /// sharded masters: `zero1::Zero1Overlap`), through `seam::ParamSet::release`; returns
    /// how many. After any resume: resuming needs whole masters.
    fn release_masters(&mut self, _params: &mut seam::ParamSet) -> Result<usize> {
        Ok(0)
    }

    /// Work before stage `s` of a forward outside the step (validation): FSDP gathers the
    /// stage's parameters.
    fn before_stage(&mut self, _s: usize) -> Result<()> {
        Ok(())
    }

    /// Elements of optimizer state this rank keeps, of `params` parameters' elements.
    fn state_elements(&self, params: usize) -> usize {
        params
    }

    /// The directory holding a checkpoint's manifest inside step directory `dir`.
    fn manifest_dir(&self, dir: &Path) -> PathBuf {
        dir.to_path_buf()
    }

    /// Saves the parameters and the optimizer state (collective).
    fn save(&mut self, c: Ckpt<'_>) -> Result<()>;

    /// Loads a checkpoint of any strategy it can resume; returns its step count.
    fn resume(&mut self, c: Ckpt<'_>) -> Result<u64>;
}

/// What [`Strategy::forward_backward`] works on.
pub struct Pass<'a> {
    pub model: &'a dyn StagedModel,
    /// At least one; all but the last without synchronisation.
    pub batches: &'a [Batch],
    /// AdamW runs inside the backward ([`Strategy::adamw_in_backward`] allowed it and the
    /// step placed it there): the strategy updates as gradients become final.
    pub in_backward: bool,
    /// The step's AdamW, and its side stream where it runs on one.
    pub opt: &'a mut AdamW,
    pub side: Option<&'a SideStream>,
    /// Sees each stage's gradients as they become final in the last micro-batch (the
    /// clipping norm summed during the backward, for a step of one micro-batch).
    pub observe: &'a mut dyn FnMut(usize, &Grads) -> seam::Result<()>,
}

/// What the backward left: the summed loss (on the device), the averaged gradients where
/// the step's AdamW is to take them, and whether `observe` saw every final gradient.
pub struct Backward {
    pub loss: Tensor,
    pub grads: Option<Grads>,
    pub seen: bool,
}

/// What [`Strategy::update`] works on.
pub struct Update<'a> {
    pub model: &'a dyn StagedModel,
    pub grads: Option<Grads>,
    /// Take the global norm and clip at it (0: only to skip a non-finite step); `None`: no
    /// norm.
    pub clip: Option<f64>,
    /// The norm summed during the backward, where it was.
    pub staged: Option<StagedNorm<'a>>,
    pub opt: &'a mut AdamW,
    /// Inside a graph capture: nothing may stay in flight past the step.
    pub capturing: bool,
}

/// A checkpoint's place and what it holds.
pub struct Ckpt<'a> {
    pub model: &'a dyn StagedModel,
    /// The step directory.
    pub dir: &'a Path,
    /// The ranks' communicator (a one-rank step has none of its own).
    pub comm: &'a Arc<dyn Communicator>,
    pub opt: &'a mut AdamW,
}

/// The replicated optimizer's update ([`Strategy::update`]'s default): the step's AdamW
/// over every parameter with the averaged gradients, scaled by the clipping coefficient
/// where the step clips.
pub fn replicated_update(u: Update<'_>) -> Result<Option<Tensor>> {
    let Some(g) = u.grads else {
        return Ok(None);
    };
    let Some(clip) = u.clip else {
        u.opt.step_params(u.model.params(), &g)?;
        return Ok(None);
    };
    let nc = norm_and_coef(u.staged, &g, clip)?;
    u.opt.set_grad_scale(Some(nc.clone()));
    u.opt.step_params(u.model.params(), &g)?;
    Ok(Some(nc))
}

/// `[norm, coef]` of the gradients `g` clipped at `clip`: from the norm summed during the
/// backward where there is one (`staged`), else taken now.
pub fn norm_and_coef(staged: Option<StagedNorm>, g: &Grads, clip: f64) -> Result<Tensor> {
    Ok(match staged {
        Some(n) => n.finish(clip)?,
        None => seam::clip::norm_and_coef(g, clip)?,
    })
}

/// [`summed`] for a strategy that synchronises in the last micro-batch's backward:
/// `f(b, last)` runs one (without synchronisation unless `last`) and returns its loss and
/// whether `observe` saw every final gradient; returns the summed loss and the last one's
/// flag.
pub fn summed_seen(
    model: &dyn StagedModel,
    batches: &[Batch],
    mut f: impl FnMut(&Batch, bool) -> Result<(Tensor, bool)>,
) -> Result<(Tensor, bool)> {
    let mut seen = false;
    let loss = summed(batches, model.params().bf16_shadows(), |b, last| {
        let (l, s) = f(b, last)?;
        seen = s;
        Ok(l)
    })?;
    Ok((loss, seen))
}

/// The losses of `f` on every micro-batch, summed on the device; `f(b, last)` is told
/// whether `b` is the last (the one whose backward synchronises). The bf16 copies fresh
/// before the first are fresh again before each later one (`shadows`: the model's).
pub fn summed(
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

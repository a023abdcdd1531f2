//! `zero1::Zero1Overlap` as a strategy (ZeRO-1 as a distributed optimizer): buckets
//! reduce-scattered during the last micro-batch's backward, the global norm from the
//! slices, AdamW on this rank's slices writing their bf16 copies, every bucket all-gathered
//! back.

use crate::Zero1Overlap;
use anyhow::Result;
use candle_core::Tensor;
use comm::Communicator;
use seam::{AdamW, Grads, StagedNorm};
use std::path::{Path, PathBuf};
use step::strategy::{summed_seen, Backward, Ckpt, Pass, Strategy, Update, GROUP};

impl Strategy for Zero1Overlap {
    fn comm(&self) -> Option<&dyn Communicator> {
        Some(self.ddp().comm())
    }

    fn settle(&mut self) -> Result<()> {
        Ok(self.sync_params()?)
    }

    fn set_lr(&mut self, lr: f64) {
        self.optimizer_mut().cfg.lr = lr;
    }

    fn advance_for_replay(&mut self, _opt: &mut AdamW) -> Result<()> {
        self.optimizer_mut().advance_for_replay()?;
        self.replayed(); // the replay's AdamW leaves stale what its host code would mark
        Ok(())
    }

    fn forward_backward(&mut self, p: Pass<'_>) -> Result<Backward> {
        let Pass {
            model,
            batches,
            observe,
            ..
        } = p;
        let (loss, seen) = summed_seen(model, batches, |b, last| match last {
            false => Ok((self.forward_backward_no_sync(model, b)?, false)),
            true => {
                let obs = |s: usize, g: &Grads| Ok(observe(s, g)?);
                Ok(self.forward_backward_observed(model, b, obs)?)
            }
        })?;
        Ok(Backward {
            loss,
            grads: None,
            seen,
        })
    }

    fn update(&mut self, u: Update<'_>) -> Result<Option<Tensor>> {
        let nc = step_shards(self, u.clip, u.staged, u.model.params().bf16_shadows())?;
        if u.capturing {
            // This step's gathers are queued for the next forward: the next replay's first
            // work, beside its forward (Megatron-Core's overlap_param_gather).
            self.collect_launched()?;
        }
        Ok(nc)
    }

    fn release_masters(&mut self, params: &mut seam::ParamSet) -> Result<usize> {
        Ok(Zero1Overlap::release_masters(self, params)?)
    }

    fn before_stage(&mut self, s: usize) -> Result<()> {
        Ok(Zero1Overlap::before_stage(self, s)?)
    }

    fn state_elements(&self, _params: usize) -> usize {
        Zero1Overlap::state_elements(self)
    }

    fn manifest_dir(&self, dir: &Path) -> PathBuf {
        dir.join(GROUP)
    }

    fn save(&mut self, c: Ckpt<'_>) -> Result<()> {
        Ok(Zero1Overlap::save(self, &c.dir.join(GROUP))?)
    }

    fn resume(&mut self, c: Ckpt<'_>) -> Result<u64> {
        let group = c.dir.join(GROUP);
        let (s, cfg, ahead, fsdp) = (
            self.ddp().options(),
            self.optimizer().cfg,
            self.gather_ahead(),
            self.fsdp,
        );
        let mut r = match group.is_dir() {
            true => Zero1Overlap::resume(c.comm.clone(), c.model, s, cfg, &group)?,
            false => Zero1Overlap::resume_replicated(c.comm.clone(), c.model, s, cfg, c.dir)?,
        };
        r.set_gather_ahead(ahead);
        r.set_fsdp(fsdp);
        *self = r;
        Ok(self.optimizer().steps_taken())
    }
}

/// ZeRO-1's update: where the step takes the norm (`clip` given: clipping at it, or 0 to
/// skip non-finite steps only), the global norm from every rank's slices (their sums of
/// squares all-reduced; or `staged`, taken in the backward on one rank); AdamW on this
/// rank's slices scaled by the coefficient, the buckets all-gathered. Returns `[norm,
/// coef]` where it took the norm.
fn step_shards(
    z: &mut Zero1Overlap,
    clip: Option<f64>,
    staged: Option<StagedNorm<'_>>,
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
    shards: &[::ddp::BucketShard],
    clip: f64,
) -> Result<Tensor> {
    let grads = || Ok(Zero1Overlap::shard_grads(shards));
    Ok(z.ddp().parts_norm_and_coef(grads, clip)?)
}

//! `ddp::Ddp` as a strategy: the gradients averaged by any of ddp's all-reduce strategies,
//! AdamW (replicated) on every rank; with one micro-batch and no clipping, AdamW runs on
//! each bucket as soon as its all-reduce is collected. A split all-reduce
//! ([`crate::split`]) takes the norm from the reduce-scattered parts and steps each bucket
//! once its all-gather is in (the gathers beside AdamW, or already in during the backward).

use crate::Ddp;
use anyhow::Result;
use candle_core::Tensor;
use comm::Communicator;
use seam::{Grads, InBackward};
use step::strategy::{
    replicated_update, resume_replicated, summed, summed_seen, Backward, Ckpt, Pass, Strategy,
    Update,
};

impl Strategy for Ddp {
    fn comm(&self) -> Option<&dyn Communicator> {
        Some(Ddp::comm(self))
    }

    fn adamw_in_backward(&self, _micro_batches: usize) -> bool {
        !self.options().split
    }

    fn update(&mut self, u: Update<'_>) -> Result<Option<Tensor>> {
        match self.options().split {
            true => split_update(self, u),
            false => replicated_update(u),
        }
    }

    fn forward_backward(&mut self, p: Pass<'_>) -> Result<Backward> {
        if !p.in_backward {
            // A split all-reduce's gathers are waited for in the update, bucket by bucket.
            let gather_later = self.options().split;
            return synced(self, p, gather_later);
        }
        let Pass {
            model,
            batches,
            opt,
            side,
            ..
        } = p;
        let mut ib = InBackward::begin(opt, model.params(), side)?;
        let loss = summed(
            batches,
            model.params().bf16_shadows(),
            |b, last| match last {
                false => Ok(self.forward_backward_no_sync(model, b)?),
                true => Ok(self.forward_backward_reduced(model, b, |g| Ok(ib.update(g)?))?),
            },
        )?;
        ib.finish()?;
        Ok(Backward {
            loss,
            grads: None,
            seen: false,
        })
    }

    fn save(&mut self, c: Ckpt<'_>) -> Result<()> {
        Ok(crate::checkpoint::save(
            Ddp::comm(self),
            c.dir,
            c.model,
            c.opt,
        )?)
    }

    fn resume(&mut self, c: Ckpt<'_>) -> Result<u64> {
        resume_replicated(Ddp::comm(self), c)
    }
}

/// All but the last micro-batch without synchronisation, the last one's buckets reduced
/// during its backward (`observe` seeing each stage's gradients); the averaged gradients
/// (a split all-reduce's gathered at once).
pub fn observed(d: &mut Ddp, p: Pass<'_>) -> Result<Backward> {
    synced(d, p, false)
}

/// [`observed`]; `gather_later`: a split all-reduce's gathers are left to the update.
fn synced(d: &mut Ddp, p: Pass<'_>, gather_later: bool) -> Result<Backward> {
    let Pass {
        model,
        batches,
        observe,
        ..
    } = p;
    let (loss, seen) = summed_seen(model, batches, |b, last| match last {
        false => Ok((d.forward_backward_no_sync(model, b)?, false)),
        true => {
            let obs = |s: usize, g: &Grads| Ok(observe(s, g)?);
            Ok(d.forward_backward_observed(model, b, |_| Ok(()), obs)?)
        }
    })?;
    let grads = match gather_later {
        true => None,
        false => Some(d.finish_gradient_synchronization()?),
    };
    Ok(Backward { loss, grads, seen })
}

/// A split all-reduce's update: the norm from the reduce-scattered parts (or the one
/// summed during the backward), every bucket's all-gather launched, AdamW on each bucket
/// once its gather is in.
fn split_update(d: &mut Ddp, u: Update<'_>) -> Result<Option<Tensor>> {
    let s = d.finish_split()?;
    let nc = match (u.clip, u.staged) {
        (None, _) => None,
        (Some(clip), Some(staged)) => Some(staged.finish(clip)?),
        (Some(clip), None) => Some(d.parts_norm_and_coef(|| s.parts(d), clip)?),
    };
    // Launched after the norm's all-reduce, which would otherwise queue behind them.
    let gathered = s.gather(d)?;
    u.opt.set_grad_scale(nc.clone());
    let mut ib = InBackward::begin(u.opt, u.model.params(), None)?;
    for g in gathered {
        g.work.wait()?;
        ib.update(g.grads)?;
    }
    ib.finish()?;
    u.opt.set_grad_scale(None);
    Ok(nc)
}

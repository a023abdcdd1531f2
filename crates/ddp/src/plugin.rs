//! `ddp::Ddp` as a strategy: the gradients averaged by any of ddp's all-reduce strategies,
//! AdamW (replicated) on every rank; with one micro-batch and no clipping, AdamW runs on
//! each bucket as soon as its all-reduce is collected. In split mode (crate::split) the
//! backward reduce-scatters, the norm comes from the shards, and AdamW updates each
//! launch's parameters once their gradients' all-gather lands.

use crate::Ddp;
use anyhow::anyhow;
use anyhow::Result;
use candle_core::Tensor;
use comm::Communicator;
use seam::{Grads, InBackward};
use step::strategy::{norm_of_parts, replicated_update, resume_replicated, summed, summed_seen};
use step::strategy::{Backward, Ckpt, Pass, Strategy, Update};

impl Strategy for Ddp {
    fn comm(&self) -> Option<&dyn Communicator> {
        Some(Ddp::comm(self))
    }

    fn adamw_in_backward(&self, _micro_batches: usize) -> bool {
        !self.splits()
    }

    fn forward_backward(&mut self, p: Pass<'_>) -> Result<Backward> {
        if self.splits() {
            let (loss, seen) = summed_seen(p.model, p.batches, |b, last| match last {
                false => Ok((self.forward_backward_no_sync(p.model, b)?, false)),
                true => {
                    Ok(self.forward_backward_observed(p.model, b, |_| Ok(()), |_, _| Ok(()))?)
                }
            })?;
            let grads = None; // gathered in `update`
            return Ok(Backward { loss, grads, seen });
        }
        if !p.in_backward {
            return observed(self, p);
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

    fn update(&mut self, u: Update<'_>) -> Result<Option<Tensor>> {
        if !self.splits() {
            return replicated_update(u);
        }
        let comm = self.comm.clone();
        let (clip, staged) = (u.clip, u.staged);
        let (nc, gathers) = self.finish_split(|shards| {
            let parts: Grads = shards.iter().cloned().map(Some).collect();
            let nc = clip.map(|c| match staged {
                Some(n) => Ok(n.finish(c)?),
                None => norm_of_parts(comm.as_ref(), &parts, c),
            });
            anyhow::Ok(nc.transpose()?)
        })?;
        u.opt.set_grad_scale(nc.clone());
        gathers
            .step(u.opt, u.model.params())
            .map_err(|e| anyhow!(e))?;
        Ok(nc)
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
/// during its backward (`observe` seeing each stage's gradients); the averaged gradients.
pub fn observed(d: &mut Ddp, p: Pass<'_>) -> Result<Backward> {
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
    Ok(Backward {
        loss,
        grads: Some(d.finish_gradient_synchronization()?),
        seen,
    })
}

//! `ddp::Ddp` as a strategy: the gradients averaged by any of ddp's all-reduce strategies,
//! AdamW (replicated) on every rank; with one micro-batch and no clipping, AdamW runs on
//! each bucket as soon as its all-reduce is collected.

use crate::Ddp;
use anyhow::Result;
use comm::Communicator;
use seam::{Grads, InBackward};
use step::strategy::{resume_replicated, summed, summed_seen, Backward, Ckpt, Pass, Strategy};

impl Strategy for Ddp {
    fn comm(&self) -> Option<&dyn Communicator> {
        Some(Ddp::comm(self))
    }

    fn adamw_in_backward(&self, _micro_batches: usize) -> bool {
        true
    }

    fn forward_backward(&mut self, p: Pass<'_>) -> Result<Backward> {
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

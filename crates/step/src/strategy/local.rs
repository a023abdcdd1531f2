//! One rank, no communication.

use super::{summed, Backward, Ckpt, Pass, Strategy};
use anyhow::Result;
use comm::Communicator;
use seam::accum::Accumulator;
use seam::{Grads, InBackward};

/// One rank: no communication; AdamW inside the backward where a step has one micro-batch.
#[derive(Debug, Default, Clone, Copy)]
pub struct Local;

impl Strategy for Local {
    fn comm(&self) -> Option<&dyn Communicator> {
        None
    }

    fn adamw_in_backward(&self, micro_batches: usize) -> bool {
        micro_batches == 1
    }

    fn forward_backward(&mut self, p: Pass<'_>) -> Result<Backward> {
        let Pass {
            model,
            batches,
            in_backward,
            opt,
            side,
            observe,
        } = p;
        if in_backward {
            let tape = seam::forward(model, &batches[0])?;
            let loss = tape.loss().clone();
            let mut ib = InBackward::begin(opt, model.params(), side)?;
            tape.backward(|s, g| ib.stage(&model.stage_params(s), g))?;
            ib.finish()?;
            return Ok(Backward {
                loss,
                grads: None,
                seen: false,
            });
        }
        // One micro-batch: its gradients as they are (AdamW reads bf16). More: f32 sums in
        // place, the weight gradients' in their GEMMs, the last micro-batch averaging
        // (seam::accum).
        let k = batches.len();
        let (mut one, mut sum) = (None, Accumulator::default());
        let loss = summed(batches, model.params().bf16_shadows(), |b, last| match k {
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
        let grads = match one {
            Some(g) => g,
            None => sum.take()?,
        };
        Ok(Backward {
            loss,
            grads: Some(grads),
            seen: true,
        })
    }

    fn save(&mut self, c: Ckpt<'_>) -> Result<()> {
        Ok(crate::format::flat::save(
            c.comm.as_ref(),
            c.dir,
            c.model,
            c.opt,
        )?)
    }

    fn resume(&mut self, c: Ckpt<'_>) -> Result<u64> {
        let comm = c.comm.clone();
        crate::ckpt::resume_replicated(comm.as_ref(), c)
    }
}

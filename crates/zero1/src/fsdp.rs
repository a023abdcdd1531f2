//! FSDP (ZeRO-3): the bf16 copies sharded too. On top of sharded masters
//! ([`crate::masters`]), each rank keeps only its chunk of every released parameter's bf16
//! copy (AdamW writes it: `seam::Span::copy_to`); the copies the model reads are views into
//! two stage buffers, the parameters of stage s in buffer s mod 2. Stage s's chunks are
//! all-gathered there right before its forward and again right before its backward (the
//! Ddp's stage hook after stage s + 1's backward: nothing runs between the two), as
//! FSDP2 reshards after the forward. Validation gathers the same way
//! ([`Zero1Overlap::before_stage`]), and in every micro-batch of an accumulating step
//! (`ddp::Ddp::forward_backward_no_sync_with`). Gradients are reduce-scattered and freed
//! as ZeRO-2's (accumulated micro-batches summed whole first, as ZeRO-2's are).
//!
//! Not yet: prefetching a stage ahead; a forward outside the step and validation
//! (sampling from the model reads stale buffers).

use crate::error::{Result, Zero1Error};
use crate::overlap::Zero1Overlap;
use candle_core::{DType, Tensor};
use comm::Communicator;
use seam::shadow::Bf16Shadows;
use std::sync::Arc;

/// Per stage: its (this rank's chunk, the stage buffer's view) all-gather pairs.
pub(crate) struct Units {
    stages: Vec<Vec<(Tensor, Tensor)>>,
}

impl Units {
    /// All-gathers stage `s`'s parameters into their stage buffer (the compute stream
    /// waits; nothing for a stage without released parameters).
    pub(crate) fn gather(&self, s: usize, comm: &dyn Communicator) -> comm::Result<()> {
        match self.stages.get(s) {
            Some(pairs) if !pairs.is_empty() => comm.all_gather_coalesced_async(pairs)?.wait(),
            _ => Ok(()),
        }
    }
}

impl Zero1Overlap {
    /// After [`Self::release_masters`]: shards the released parameters' bf16 copies (see
    /// the module's doc); returns how many. The copies' memory goes once the model's
    /// slots point at the stage buffers.
    pub fn shard_copies(&mut self, shadows: &Bf16Shadows) -> Result<usize> {
        let stages = self.stage_params.len();
        // Per stage: (span, parameter) of its released parameters.
        let mut by_stage: Vec<Vec<(usize, usize)>> = vec![Vec::new(); stages];
        for (k, span) in self.spans.iter().enumerate() {
            let (Some(i), Some(_)) = (self.owner[k].1, span.copy_at) else {
                continue;
            };
            let s = (0..stages).find(|&s| self.stage_params[s].contains(&i));
            let s = s.ok_or_else(|| Zero1Error::Input(format!("parameter {i}: in no stage")))?;
            by_stage[s].push((k, i));
        }
        let size = |ks: &Vec<(usize, usize)>| -> usize {
            ks.iter().map(|&(_, i)| self.shapes[i].elem_count()).sum()
        };
        let len = by_stage.iter().map(size).max().unwrap_or(0);
        let Some(dev) = self.spans.first().map(|s| s.var.device().clone()) else {
            return Ok(0);
        };
        if len == 0 {
            return Ok(0);
        }
        let pool = [
            Tensor::zeros(len, DType::BF16, &dev)?,
            Tensor::zeros(len, DType::BF16, &dev)?,
        ];
        let mut units = Vec::with_capacity(stages);
        let mut n = 0;
        for (s, ks) in by_stage.iter().enumerate() {
            let (mut off, mut pairs) = (0, Vec::new());
            for &(k, i) in ks {
                let whole = shadows.copy(i).ok_or_else(|| {
                    Zero1Error::Input(format!("parameter {i}: released without a bf16 copy"))
                })?;
                let span = &mut self.spans[k];
                let chunk =
                    seam::span::own(&whole.flatten_all()?.narrow(0, span.at(), span.len)?)?;
                let numel = self.shapes[i].elem_count();
                let view = pool[s % 2].narrow(0, off, numel)?;
                shadows.set_copy(i, view.reshape(self.shapes[i].clone())?);
                span.copy_to = Some(chunk.clone());
                pairs.push((chunk, view));
                off += numel;
                n += 1;
            }
            units.push(pairs);
        }
        let units = Arc::new(Units { stages: units });
        self.units = Some(units.clone());
        // After stage s's backward is queued, stage s - 1's parameters come back (their
        // buffer's last reader, stage s + 1's backward, is queued before).
        let comm = self.comm.clone();
        self.ddp.set_stage_hook(Some(Box::new(move |s| match s {
            0 => Ok(()),
            s => units.gather(s - 1, comm.as_ref()),
        })));
        Ok(n)
    }

    /// Work before stage `s` of a forward outside the step (validation): FSDP's gather
    /// of the stage's parameters.
    pub fn before_stage(&self, s: usize) -> Result<()> {
        Ok(self.gather_stage()(s)?)
    }

    /// What runs before each forward stage, in the step and outside it: FSDP's gather of
    /// the stage's parameters (nothing where the copies are not sharded). A closure of
    /// its own, for the Ddp's forward hooks beside `&mut self.ddp`.
    pub(crate) fn gather_stage(&self) -> impl FnMut(usize) -> comm::Result<()> {
        let (units, comm) = (self.units.clone(), self.comm.clone());
        move |s| match &units {
            Some(u) => u.gather(s, comm.as_ref()),
            None => Ok(()),
        }
    }

    /// With `true`, releasing the masters (the `step::Strategy` impl's `release_masters`)
    /// shards the copies too: FSDP. Build the Ddp with `release_gradients` (ZeRO-2's).
    pub fn set_fsdp(&mut self, on: bool) {
        self.fsdp = on;
    }

    /// Whether this is FSDP ([`Self::set_fsdp`]).
    pub fn fsdp(&self) -> bool {
        self.fsdp
    }

    /// Whether the copies are sharded ([`Self::shard_copies`]).
    pub fn copies_sharded(&self) -> bool {
        self.units.is_some()
    }
}

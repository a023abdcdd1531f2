//! FSDP (ZeRO-3): the bf16 copies sharded too. On top of sharded masters
//! ([`crate::masters`]), a rank keeps no bf16 copy of a released parameter at all: the
//! copies the model reads are views into two stage buffers, the parameters of stage s in
//! buffer s mod 2, and stage s is all-gathered there from each rank's f32 master chunk,
//! cast to bf16 as the gather is launched (FSDP2's mixed precision, Megatron-Core's
//! distributed optimizer): the same bits AdamW would write into a copy. The communicator
//! casts (`comm::Communicator::all_gather_cast_coalesced_async`; NCCL on its own stream,
//! so the casts overlap compute).
//!
//! Each stage is gathered before its forward and again before its backward, one stage
//! ahead (FSDP2's prefetch, reshard after forward). Right before forward stage s it
//! waits for stage s (launched before stage s - 1) and launches stage s + 1 into the
//! other buffer, whose last reader, stage s - 1, is queued before. After stage s's
//! backward (the Ddp's stage hook) it waits for stage s - 1 and launches s - 2 into the
//! buffer stage s just left. The last two forward stages stay for their backward.
//! Units ([`Zero1Overlap::set_fsdp_unit`]): several consecutive stages gathered as one,
//! in one launch into one buffer (read "unit" for "stage" above and below); by default as
//! many as make 200 MB (`memplan::fsdp_unit`).
//! [`Zero1Overlap::set_fsdp_gathers`]: k stages ahead in k + 1 buffers; and the last
//! stages' forward gathers kept for their backward, in a buffer each (all of them: the
//! backward gathers nothing, in the memory of the whole bf16 parameters, as ZeRO-2's).
//! Kept stages' backwards gather nothing, and while they run the stages before them wait
//! in the shared buffers from the forward, so the look-ahead finds them there.
//! Validation gathers the same way ([`Zero1Overlap::before_stage`]), and so does every
//! micro-batch of an accumulating step (`ddp::Ddp::forward_backward_no_sync_with`).
//! Gradients are reduce-scattered and freed as ZeRO-2's (accumulated micro-batches
//! summed whole first, as ZeRO-2's are).
//!
//! A forward outside the step (validation, `train`'s samples) calls
//! [`Zero1Overlap::before_stage`] before each stage, on every rank together.

use crate::error::{Result, Zero1Error};
use crate::overlap::Zero1Overlap;
use candle_core::{DType, Tensor};
use comm::{Communicator, Work};
use seam::shadow::Bf16Shadows;
use std::sync::{Arc, Mutex};

/// Per buffer: the unit it holds (or is being gathered into) and that gather.
type Slot = (Option<usize>, Option<Work>);

/// The gathers, by unit (`unit` consecutive stages gathered as one launch): per unit,
/// (this rank's f32 master chunk, its buffer's view of the parameter) pairs, as
/// `Communicator::all_gather_cast_coalesced_async` takes them; unit u lives
/// in buffer `slot_of[u]`; `depth` units are gathered ahead.
pub(crate) struct Units {
    units: Vec<Vec<(Tensor, Tensor)>>,
    /// Stages a unit: unit u holds stages u·unit up to (u + 1)·unit.
    unit: usize,
    slot_of: Vec<usize>,
    slots: Mutex<Vec<Slot>>,
    depth: usize,
    /// `FSDP_CAST=compute`: cast the shards on the compute stream, not where the
    /// communicator casts them (NCCL: its own stream), to measure what that saves.
    cast_on_compute: bool,
}

impl Units {
    fn slots(&self) -> std::sync::MutexGuard<'_, Vec<Slot>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Launches unit `u`'s all-gather into its buffer, unless it is there or on its way
    /// (or the unit has no released parameters).
    fn launch(&self, u: usize, comm: &dyn Communicator) -> comm::Result<()> {
        let Some(pairs) = self.units.get(u).filter(|p| !p.is_empty()) else {
            return Ok(());
        };
        let mut slots = self.slots();
        let slot = &mut slots[self.slot_of[u]];
        if slot.0 == Some(u) {
            return Ok(());
        }
        if let Some(w) = slot.1.take() {
            w.wait()?;
        }
        let work = match self.cast_on_compute {
            true => comm::all_gather_cast_on_compute(comm, pairs)?,
            false => comm.all_gather_cast_coalesced_async(pairs)?,
        };
        *slot = (Some(u), Some(work));
        Ok(())
    }

    /// Unit `u`'s parameters in their buffer before the next work on the compute stream.
    fn ready(&self, u: usize, comm: &dyn Communicator) -> comm::Result<()> {
        self.launch(u, comm)?;
        let Some(&b) = self.slot_of.get(u) else {
            return Ok(());
        };
        let mut slots = self.slots();
        let w = slots[b].1.take();
        drop(slots);
        w.map_or(Ok(()), |w| w.wait())
    }

    /// Before forward stage `s`, where it starts a unit u: a forward starts from nothing
    /// held (AdamW has run since). Unit u + k goes into the buffer of unit u + k - buffers
    /// ≤ u - 1, queued before.
    pub(crate) fn before_forward(&self, s: usize, comm: &dyn Communicator) -> comm::Result<()> {
        if s == 0 {
            let old: Vec<Slot> = self.slots().iter_mut().map(std::mem::take).collect();
            for w in old.into_iter().filter_map(|s| s.1) {
                w.wait()?;
            }
        }
        if !s.is_multiple_of(self.unit) {
            return Ok(());
        }
        let u = s / self.unit;
        self.ready(u, comm)?;
        (1..=self.depth).try_for_each(|k| self.launch(u + k, comm))
    }

    /// After backward stage `s`, where it starts a unit u (before stage `s - 1`'s, the
    /// last of unit u - 1): unit u - k goes into the buffer of unit u - k + buffers ≥ u,
    /// whose backward is queued.
    pub(crate) fn after_backward(&self, s: usize, comm: &dyn Communicator) -> comm::Result<()> {
        if s == 0 || !s.is_multiple_of(self.unit) {
            return Ok(());
        }
        let u = s / self.unit;
        self.ready(u - 1, comm)?;
        (2..=self.depth + 1)
            .filter(|&k| k <= u)
            .try_for_each(|k| self.launch(u - k, comm))
    }
}

impl Zero1Overlap {
    /// FSDP, as [`Self::release_masters`] ends, once it released `mine` ((span,
    /// parameter) pairs, the same on every rank): shards their bf16 copies (see the
    /// module's doc). Each copy becomes a view into its unit's buffer (the communicator's
    /// [`comm::Communicator::gather_buffer`]: NCCL windows, where NCCL's symmetric
    /// kernels gather), so that no whole copy is ever made: the gathers fill them before
    /// each use.
    pub(crate) fn shard_copies(
        &mut self,
        shadows: &Bf16Shadows,
        mine: &[(usize, usize)],
    ) -> Result<()> {
        let stages = self.stage_params.len();
        let (keep_last, depth) = self.fsdp_gathers;
        // Per stage: (span, parameter) of its released parameters.
        let mut by_stage: Vec<Vec<(usize, usize)>> = vec![Vec::new(); stages];
        for &(k, i) in mine {
            let s = (0..stages).find(|&s| self.stage_params[s].contains(&i));
            let s = s.ok_or_else(|| Zero1Error::Input(format!("parameter {i}: in no stage")))?;
            by_stage[s].push((k, i));
        }
        // Elements of a stage's or a unit's released parameters.
        let size = |ks: &Vec<(usize, usize)>| -> usize {
            ks.iter().map(|&(_, i)| self.shapes[i].elem_count()).sum()
        };
        // Units of `unit` consecutive stages (by default as many as make 200 MB of the
        // largest stage's bf16: memplan::fsdp_unit); those holding any of the last
        // `keep_last` stages are kept.
        let unit = match self.fsdp_unit {
            Some(unit) => unit.max(1),
            // The buffers are bf16: 2 bytes an element.
            None => memplan::fsdp_unit(2 * by_stage.iter().map(size).max().unwrap_or(0) as u64),
        };
        let nunits = stages.div_ceil(unit);
        let kept = match keep_last {
            0 => 0,
            k if k >= stages => nunits,
            k => nunits - (stages - k) / unit,
        };
        let mut by_unit: Vec<Vec<(usize, usize)>> = vec![Vec::new(); nunits];
        for (s, ks) in by_stage.into_iter().enumerate() {
            by_unit[s / unit].extend(ks);
        }
        let slot_of = slots_of(nunits, kept, depth);
        let nbuf = slot_of.iter().max().map_or(1, |&b| b + 1);
        let Some(dev) = self.spans.first().map(|s| s.var.device().clone()) else {
            return Ok(());
        };
        if by_unit.iter().all(|ks| ks.is_empty()) {
            return Ok(());
        }
        let pool = (0..nbuf)
            .map(|b| {
                let here = (0..nunits).filter(|&u| slot_of[u] == b);
                let len = here.map(|u| size(&by_unit[u])).max().unwrap_or(0).max(1);
                // The communicator's buffer (NCCL: a window whose gathers take its
                // symmetric kernels).
                self.comm.gather_buffer(len, DType::BF16, &dev)
            })
            .collect::<comm::Result<Vec<_>>>()?;
        // Each unit's (this rank's f32 master chunk, its parameter's view) pairs.
        let units = by_unit
            .iter()
            .enumerate()
            .map(|(u, ks)| {
                let views = self.copies_into(shadows, &pool[slot_of[u]], ks)?;
                let chunk = |k: usize| self.spans[k].var.as_tensor().clone();
                Ok(views.into_iter().map(|(k, v)| (chunk(k), v)).collect())
            })
            .collect::<Result<_>>()?;
        let units = Arc::new(Units {
            units,
            unit,
            slot_of,
            slots: Mutex::new((0..nbuf).map(|_| (None, None)).collect()),
            depth,
            cast_on_compute: std::env::var("FSDP_CAST").is_ok_and(|v| v == "compute"),
        });
        self.units = Some(units.clone());
        let comm = self.comm.clone();
        self.ddp.set_stage_hook(Some(Box::new(move |s| {
            units.after_backward(s, comm.as_ref())
        })));
        Ok(())
    }

    /// Work before stage `s` of a forward outside the step (validation): FSDP's gather
    /// of the stage's parameters.
    pub fn before_stage(&self, s: usize) -> Result<()> {
        Ok(self.gather_stage()(s)?)
    }

    /// What runs before each forward stage, in the step and outside it: FSDP's gathers
    /// (nothing where the copies are not sharded). A closure of its own, for the Ddp's
    /// forward hooks beside `&mut self.ddp`.
    pub(crate) fn gather_stage(&self) -> impl FnMut(usize) -> comm::Result<()> {
        let (units, comm) = (self.units.clone(), self.comm.clone());
        move |s| match &units {
            Some(u) => u.before_forward(s, comm.as_ref()),
            None => Ok(()),
        }
    }

    /// With `true`, releasing the masters (the `step::Strategy` impl's `release_masters`)
    /// shards the copies too: FSDP. Build the Ddp with `release_gradients` (ZeRO-2's).
    pub fn set_fsdp(&mut self, on: bool) {
        self.fsdp = on;
    }

    /// FSDP's gathers, before [`Self::release_masters`] shards the copies: the last
    /// `keep_last` stages keep their forward's gather for their backward (FSDP2's
    /// `reshard_after_forward=False` for those modules: a buffer each; `usize::MAX`:
    /// every stage, the whole bf16 parameters held at the backward's start, as ZeRO-2's),
    /// the others are gathered again (0, the default: FSDP2's reshard after forward);
    /// `depth` stages (units: [`Self::set_fsdp_unit`]) are gathered ahead (1, the
    /// default, to 4).
    pub fn set_fsdp_gathers(&mut self, keep_last: usize, depth: usize) -> Result<()> {
        if !(1..=4).contains(&depth) {
            let e = format!("FSDP prefetch depth {depth}: stages gathered ahead, 1 to 4");
            return Err(Zero1Error::Input(e));
        }
        self.fsdp_gathers = (keep_last, depth);
        Ok(())
    }

    /// FSDP's unit, before [`Self::release_masters`] shards the copies: `stages`
    /// consecutive stages gathered as one launch into one buffer (1 to 8; FSDP2 wraps
    /// several blocks as one module so).
    /// Fewer, larger gathers, and `stages` times the buffers' memory; the prefetch depth
    /// counts units then, and a unit holding any of the kept stages is kept. Unset, as
    /// many as make 200 MB of the largest stage's bf16 (`memplan::fsdp_unit`: three of
    /// xl's blocks, one of 6.7B's).
    pub fn set_fsdp_unit(&mut self, stages: usize) -> Result<()> {
        if !(1..=8).contains(&stages) {
            let e = format!("FSDP unit of {stages} stages: 1 to 8");
            return Err(Zero1Error::Input(e));
        }
        self.fsdp_unit = Some(stages);
        Ok(())
    }

    /// The stages a unit once the copies are sharded ([`Self::release_masters`]).
    pub fn fsdp_unit_used(&self) -> Option<usize> {
        self.units.as_ref().map(|u| u.unit)
    }

    /// Whether this is FSDP ([`Self::set_fsdp`]).
    pub fn fsdp(&self) -> bool {
        self.fsdp
    }

    /// Whether the copies are sharded ([`Self::release_masters`], with FSDP).
    pub fn copies_sharded(&self) -> bool {
        self.units.is_some()
    }
}

/// Each unit's buffer: the first units share depth + 1 buffers in turn (unit u in
/// u mod (depth + 1)); each of the last `kept` has one of its own after them.
fn slots_of(units: usize, kept: usize, depth: usize) -> Vec<usize> {
    let first_kept = units.saturating_sub(kept);
    let ring = if first_kept == 0 { 0 } else { depth + 1 };
    (0..units)
        .map(|u| match u < first_kept {
            true => u % ring,
            false => ring + u - first_kept,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::slots_of;

    #[test]
    fn kept_stages_get_buffers_of_their_own() {
        assert_eq!(slots_of(5, 0, 1), [0, 1, 0, 1, 0]);
        assert_eq!(slots_of(5, 2, 1), [0, 1, 0, 2, 3]);
        assert_eq!(slots_of(5, 2, 2), [0, 1, 2, 3, 4]);
        assert_eq!(slots_of(3, usize::MAX, 1), [0, 1, 2]);
        assert_eq!(slots_of(3, 3, 4), [0, 1, 2]);
    }
}

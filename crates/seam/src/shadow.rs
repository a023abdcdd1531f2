//! bf16 copies of the f32 master weights, written by the fused AdamW kernel as it updates
//! them, so that a bf16 forward reads them instead of casting every weight every step (the
//! casts were about 5 ms of an xl bf16 step on nvidia-h200, about 9 GB of traffic; writing
//! the copy inside AdamW adds 2 bytes per parameter to a pass that already moves 26).
//!
//! How it stays correct: a copy is *fresh* from the moment AdamW queues the update that
//! writes it until the first forward that takes it ([`Bf16Shadows::take_fresh`]); every
//! other read casts the master as before. A forward without a fresh copy casts, so the
//! values are the same bits either way (both round to nearest even). Anything that writes
//! a master outside AdamW between an update and the next forward must call
//! [`Bf16Shadows::invalidate`]; [`crate::ParamSet::copy_from`] does.
//!
//! ```no_run
//! # fn main() -> seam::Result<()> {
//! # let (mut params, grads): (seam::ParamSet, seam::Grads) = todo!();
//! params.enable_bf16_shadows(true); // a bf16 model on CUDA (TransformerLm does this)
//! let mut opt = seam::AdamW::new(seam::AdamWConfig::default())?;
//! opt.step_params(&params, &grads)?; // writes the copies the next forward takes
//! let copy = params.bf16_shadows().take_fresh(0); // Some(bf16 tensor) once, then None
//! # let _ = copy; Ok(()) }
//! ```

use crate::error::Result;
use candle_core::{DType, Tensor};
use std::sync::Mutex;

/// One parameter's copy and whether it equals the master now.
#[derive(Default)]
struct Slot {
    copy: Option<Tensor>,
    fresh: bool,
    /// The copy is the parameter's value and its master may be stale outside this rank's
    /// part (a ZeRO-1 rank all-gathered the copies, not the masters): every forward takes
    /// the copy until AdamW writes it again or a master is written ([`Bf16Shadows::invalidate`]).
    held: bool,
}

/// The bf16 copies of a [`crate::ParamSet`]'s parameters (none until enabled).
#[derive(Default)]
pub struct Bf16Shadows {
    enabled: bool,
    slots: Mutex<Vec<Slot>>,
    /// Per parameter: the model's forward reads it only through its copy (never the
    /// master), so a distributed optimizer may keep only the copy whole between steps.
    copy_only: Vec<bool>,
}

impl Bf16Shadows {
    /// Whether AdamW writes copies for these parameters.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    pub(crate) fn set_enabled(&mut self, on: bool) {
        self.enabled = on;
        if !on {
            self.slots_mut().clear();
            self.copy_only.clear();
        }
    }

    /// Declares which parameters the model's forward reads only through their copies
    /// (`on[i]`), as a bf16 model whose forward takes [`Self::take_fresh`] or else casts
    /// does: for those, a ZeRO-1 rank may update and all-gather the copies alone
    /// ([`Self::gatherable`]). A parameter the forward reads as the f32 master (an
    /// embedding table read in f32) must not be declared. Ignored while disabled.
    pub fn set_copy_only(&mut self, on: Vec<bool>) {
        if self.enabled {
            self.copy_only = on;
        }
    }

    /// Whether parameter `i`'s copy alone may carry its value between steps
    /// ([`Self::set_copy_only`]).
    pub fn gatherable(&self, i: usize) -> bool {
        self.enabled && self.copy_only.get(i).copied().unwrap_or(false)
    }

    /// Parameter `i`'s copy, whole, is its value from now on (gathered from every rank's
    /// part; the gather is queued before any forward that reads it): forwards take it,
    /// not the master, until AdamW writes it again or a master write ([`Self::invalidate`]).
    /// Gathering the masters as well leaves it held: the copy is then their rounding.
    pub fn hold(&self, i: usize) {
        if let Some(s) = self.slots_mut().get_mut(i) {
            s.held = true;
            s.fresh = true;
        }
    }

    /// Parameter `i`'s copy buffer as it is (fresh or not; `None` before it was written).
    pub fn copy(&self, i: usize) -> Option<Tensor> {
        self.slots_mut().get(i).and_then(|s| s.copy.clone())
    }

    /// Which copies are fresh or held now (for [`Self::restore_fresh`]).
    pub fn fresh_mask(&self) -> Vec<bool> {
        self.slots_mut().iter().map(|s| s.fresh || s.held).collect()
    }

    /// Marks fresh again the copies of `mask` ([`Self::fresh_mask`]). Right only while no
    /// master and no copy has been written since the mask was taken: the micro-batches of
    /// one step, whose forwards then all read the copies AdamW wrote once, instead of
    /// casting every weight again per micro-batch.
    pub fn restore_fresh(&self, mask: &[bool]) {
        for (s, &m) in self.slots_mut().iter_mut().zip(mask) {
            s.fresh |= m && s.copy.is_some();
        }
    }

    fn slots_mut(&self) -> std::sync::MutexGuard<'_, Vec<Slot>> {
        // A panic elsewhere cannot leave a slot half-written: recover the data.
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Parameter `i`'s copy if AdamW wrote it since the last forward took it; takes its
    /// freshness (the next caller casts unless AdamW writes it again).
    pub fn take_fresh(&self, i: usize) -> Option<Tensor> {
        let mut slots = self.slots_mut();
        let slot = slots.get_mut(i)?;
        if !std::mem::take(&mut slot.fresh) && !slot.held {
            return None;
        }
        slot.copy.clone()
    }

    /// Writes every copy from its master now (`masters[i]` for parameter i; a cast that
    /// rounds to nearest even, as AdamW's kernel does) and marks it fresh. For a caller that
    /// runs forwards and backwards with no AdamW between them (`bench single --mode
    /// fwd-bwd`): its forwards then read the copies as a training step's do, instead of
    /// casting every weight, work that a training step leaves to AdamW. No-op when disabled.
    pub fn write_all(&self, masters: &[&Tensor]) -> Result<()> {
        if !self.enabled {
            return Ok(());
        }
        let mut slots = self.slots_mut();
        let n = slots.len().max(masters.len());
        slots.resize_with(n, Slot::default);
        for (slot, m) in slots.iter_mut().zip(masters) {
            slot.copy = Some(m.detach().to_dtype(DType::BF16)?);
            slot.fresh = true;
        }
        Ok(())
    }

    /// Writes parameter `i`'s copy from `master` now (its cast, rounding to nearest even as
    /// AdamW's kernel does), in its buffer (made if need be); it is stale until marked
    /// ([`Self::hold`]). No-op when disabled.
    pub fn write(&self, i: usize, master: &Tensor) -> Result<()> {
        if !self.enabled {
            return Ok(());
        }
        let t = self.target(i, master)?;
        let cast = master.detach().to_dtype(DType::BF16)?.contiguous()?;
        t.slice_set(&cast, 0, 0)?;
        Ok(())
    }

    /// Makes `t` parameter `i`'s copy (its shape; a view into a buffer that a distributed
    /// optimizer gathers the parameter into before each use: FSDP), held.
    pub fn set_copy(&self, i: usize, t: Tensor) {
        let mut slots = self.slots_mut();
        if slots.len() <= i {
            slots.resize_with(i + 1, Slot::default);
        }
        slots[i] = Slot {
            copy: Some(t),
            fresh: true,
            held: true,
        };
    }

    /// Marks every written copy fresh again. Right only while no master has changed since
    /// its copy was written (by [`Self::write_all`] or AdamW): a forward-and-backward loop
    /// without an optimizer step.
    pub fn reuse(&self) {
        for s in self.slots_mut().iter_mut() {
            s.fresh = s.copy.is_some();
        }
    }

    /// Marks every copy stale (a master was written outside AdamW).
    pub fn invalidate(&self) {
        for s in self.slots_mut().iter_mut() {
            s.fresh = false;
            s.held = false;
        }
    }

    /// The buffer AdamW writes parameter `i`'s copy into (allocated on first use, shaped
    /// and placed as `master`). It is stale until [`Self::mark_fresh`].
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn target(&self, i: usize, master: &Tensor) -> Result<Tensor> {
        let mut slots = self.slots_mut();
        if slots.len() <= i {
            slots.resize_with(i + 1, Slot::default);
        }
        let slot = &mut slots[i];
        slot.fresh = false;
        slot.held = false;
        let ok = matches!(&slot.copy, Some(c) if c.dims() == master.dims()
            && c.device().same_device(master.device()));
        if !ok {
            slot.copy = Some(Tensor::zeros(master.dims(), DType::BF16, master.device())?);
        }
        Ok(slot.copy.clone().expect("set above"))
    }

    /// Parameter `i`'s copy now holds its master (its update is queued).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn mark_fresh(&self, i: usize) {
        if let Some(s) = self.slots_mut().get_mut(i) {
            s.fresh = true;
        }
    }

    /// Parameter `i` was updated without writing its copy.
    pub(crate) fn mark_stale(&self, i: usize) {
        if let Some(s) = self.slots_mut().get_mut(i) {
            s.fresh = false;
            s.held = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn a_copy_is_taken_once_after_each_write_and_never_after_invalidate() {
        let mut s = Bf16Shadows::default();
        s.set_enabled(true);
        let master = Tensor::ones((2, 3), DType::F32, &Device::Cpu).unwrap();
        assert!(s.take_fresh(0).is_none(), "nothing written yet");
        let t = s.target(1, &master).unwrap();
        assert_eq!((t.dims(), t.dtype()), (&[2usize, 3][..], DType::BF16));
        assert!(s.take_fresh(1).is_none(), "not fresh until marked");
        s.mark_fresh(1);
        assert!(s.take_fresh(1).is_some());
        assert!(s.take_fresh(1).is_none(), "a second forward casts");
        s.mark_fresh(1);
        s.invalidate();
        assert!(s.take_fresh(1).is_none(), "a master written outside AdamW");
        s.mark_fresh(1);
        s.mark_stale(1);
        assert!(s.take_fresh(1).is_none(), "updated without its copy");
        s.mark_fresh(1);
        let again = s.target(1, &master).unwrap();
        assert!(
            s.take_fresh(1).is_none(),
            "a target being rewritten is stale"
        );
        assert_eq!(again.dims(), t.dims());
    }

    #[test]
    fn write_all_gives_every_copy_as_the_cast_and_reuse_offers_them_again() {
        let mut s = Bf16Shadows::default();
        let m = Tensor::new(&[1.0f32, 1.0 + 1.0 / 512.0, -3.3], &Device::Cpu).unwrap();
        s.write_all(&[&m]).unwrap();
        assert!(s.take_fresh(0).is_none(), "disabled: nothing written");
        s.set_enabled(true);
        s.write_all(&[&m, &m]).unwrap();
        let c = s.take_fresh(1).unwrap();
        assert_eq!(
            c.to_vec1::<half::bf16>().unwrap(),
            m.to_dtype(DType::BF16)
                .unwrap()
                .to_vec1::<half::bf16>()
                .unwrap()
        );
        assert!(s.take_fresh(1).is_none(), "taken");
        s.reuse();
        assert!(s.take_fresh(1).is_some(), "offered again");
        assert!(s.take_fresh(2).is_none(), "never written");
    }
}

//! The norm from the reduce-scatters: a deferred launch (`comm::Deferred::norm`) writes the
//! norm of this rank's reduced parts into a slot of its own (NCCL's copy-engine adds sum
//! the squares as they write the parts), so that ZeRO-1's norm from its shards (ZeRO-2's
//! and FSDP's where their launches are deferred: `crate::scatter::deferred`), and split
//! DDP's from its parts, need not read them again after the backward: the norm of the
//! slots is this rank's. xl bf16 at world 2: ZeRO-1 38.27 ms a step against 38.58 reading
//! the shards (call 187, nvidia-h200-x2); split DDP 44.30 against 44.88 (call 198,
//! nvidia-h200-x4).
//! One slot a launch, taken in launch order; a backward with a launch that took none
//! (slots full, or a launch whose communicator would take the norm at the wait:
//! `Communicator::norm_with_sums`) has none, and the norm reads the shards as before.
//! `DDP_SUMSQ=0`: no slots. The global norm and clipping coefficient from this rank's
//! norm or parts: [`norm_and_coef`] (also `ddp::split::norm_and_coef`).

use crate::error::Result;
use crate::reducer::Ddp;
use candle_core::{DType, Device, Tensor};
use comm::{Communicator, ReduceOp};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A Ddp's slots (f32), how many this backward took, whether a launch took none, and the
/// last backward's norm, written into a buffer of its own (made with the slots: a tensor
/// made outside a CUDA graph capture must not be freed inside one, nor one made inside
/// dropped outside it before the replays end), whether it holds this backward's, and
/// whether each backward logs where its norm came from (`DDP_NORM_LOG=1`, read once).
pub(crate) struct Squares {
    buf: Tensor,
    used: AtomicUsize,
    missed: AtomicBool,
    norm: Tensor,
    valid: AtomicBool,
    log: bool,
}

impl Squares {
    /// Room for `slots` launches a backward.
    pub(crate) fn new(slots: usize, device: &Device) -> Result<Self> {
        Ok(Self {
            buf: Tensor::zeros(slots, DType::F32, device)?,
            used: AtomicUsize::new(0),
            missed: AtomicBool::new(false),
            norm: Tensor::zeros(1, DType::F32, device)?,
            valid: AtomicBool::new(false),
            log: std::env::var("DDP_NORM_LOG").is_ok_and(|v| v == "1"),
        })
    }
}

impl Ddp {
    /// Slots where ZeRO-1's buckets are reduce-scattered late above one rank: one a bucket
    /// (a backward launches each bucket once, alone or coalesced), and where split DDP's
    /// are: two a bucket (a launch's gradients gathered in the backward and its flat
    /// buffer go apart). `DDP_SUMSQ=0`: none. Split DDP's slots cost xl bf16 0.58 ms less a
    /// step at world 2 and 0.10 at world 4, with 12 eager steps equal to the replayed ones
    /// (call 198, nvidia-h200-x4; session 34's first try, call 187, saw them differ in the
    /// last bits: why is not established, its code was not kept). `DDP_NORM_LOG=1` logs,
    /// per rank and backward, which the norm takes.
    pub(crate) fn squares(&self) -> Result<Option<Squares>> {
        let what = (
            "the norm from the reduce-scatters' adds",
            "from the parts, after the backward",
        );
        let on = crate::options::switch("DDP_SUMSQ", what)?.unwrap_or(true);
        let slots = match (self.opts.reduce_scatter, self.opts.split) {
            (true, _) => self.buckets.len(),
            (false, true) => 2 * self.buckets.len(),
            _ => 0,
        };
        match on && slots > 0 && self.deferred && self.comm.world_size() > 1 {
            true => Ok(Some(Squares::new(slots, &self.device)?)),
            false => Ok(None),
        }
    }

    /// A new backward: no slot taken yet.
    pub(crate) fn squares_begin(&self) {
        if let Some(s) = &self.squares {
            s.used.store(0, Ordering::Relaxed);
            s.missed.store(false, Ordering::Relaxed);
            s.valid.store(false, Ordering::Relaxed);
        }
    }

    /// The next slot for a deferred launch of `pairs`; `None` where there are none (or no
    /// more), or where the communicator would not take the norm with the sums.
    pub(crate) fn norm_slot(&self, pairs: &[(Tensor, Tensor)]) -> Result<Option<Tensor>> {
        let Some(s) = &self.squares else {
            return Ok(None);
        };
        if !self.comm.norm_with_sums(pairs) {
            s.missed.store(true, Ordering::Relaxed);
            return Ok(None);
        }
        let k = s.used.fetch_add(1, Ordering::Relaxed);
        if k >= s.buf.elem_count() {
            s.missed.store(true, Ordering::Relaxed);
            return Ok(None);
        }
        Ok(Some(s.buf.narrow(0, k, 1)?))
    }

    /// After the compute stream has waited for every launch: the norm of this backward's
    /// slots and of the parts of the launches that took none, having gone beside the
    /// others (`beside`, `ddp::tail`), in one kernel (seam's, which a CUDA graph captures),
    /// times `scale` (the micro-batch averaging factor not yet applied), for
    /// [`Ddp::parts_norm`].
    pub(crate) fn squares_finish(&self, scale: Option<f64>, beside: Vec<Tensor>) -> Result<()> {
        let Some(s) = &self.squares else {
            return Ok(());
        };
        let used = s.used.load(Ordering::Relaxed);
        let missed = s.missed.load(Ordering::Relaxed);
        let from_slots = !missed && used + beside.len() > 0;
        if s.log {
            let from = if from_slots { "the slots" } else { "the parts" };
            eprintln!(
                "ddp norm: rank {} takes its norm from {from} ({used} slots taken, {} parts beside, missed: {missed})",
                self.comm.rank(),
                beside.len()
            );
        }
        if !from_slots {
            return Ok(());
        }
        let slots = (used > 0).then(|| s.buf.narrow(0, 0, used)).transpose()?;
        let all: Vec<Option<Tensor>> = std::iter::once(slots)
            .chain(beside.into_iter().map(Some))
            .collect();
        let t = seam::clip::norm_and_coef(&all, 0.0)?.narrow(0, 0, 1)?;
        let t = match scale {
            Some(k) => t.affine(k, 0.0)?,
            None => t,
        };
        s.norm.slice_set(&t, 0, 0)?;
        s.valid.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// The norm of this rank's averaged parts of the last backward's gradients (one f32;
    /// its square all-reduced is the squared global norm), where every launch took it;
    /// `None` otherwise (the norm then reads the parts).
    pub fn parts_norm(&self) -> Option<Tensor> {
        let s = self.squares.as_ref()?;
        s.valid.load(Ordering::Relaxed).then(|| s.norm.clone())
    }

    /// `[norm, coef]` of the last backward's averaged parts over every rank
    /// ([`norm_and_coef`]): from this rank's norm where its launches took it
    /// ([`Ddp::parts_norm`]: one scalar all-reduced), else from `parts()`, read.
    pub fn parts_norm_and_coef(
        &self,
        parts: impl FnOnce() -> Result<Vec<Option<Tensor>>>,
        clip: f64,
    ) -> Result<Tensor> {
        match self.parts_norm() {
            Some(n) => norm_and_coef_from_local(self.comm(), &n, clip),
            None => norm_and_coef(self.comm(), &parts()?, clip),
        }
    }
}

/// `[norm, coef]` of the gradients whose parts `parts` are on every rank (each rank's
/// sums of squares all-reduced), clipped at `clip` (0: no clipping, coef 1), as
/// `seam::clip::norm_and_coef` takes them: coef = min(1, clip ÷ (norm + 1e-6)), NaN where
/// the norm is not finite, so that AdamW skips the step. On one rank the parts are every
/// gradient, with one process's bits.
pub fn norm_and_coef(
    comm: &dyn Communicator,
    parts: &[Option<Tensor>],
    clip: f64,
) -> Result<Tensor> {
    if comm.world_size() == 1 {
        return Ok(seam::clip::norm_and_coef(parts, clip)?);
    }
    let mine = seam::clip::norm_and_coef(parts, 0.0)?;
    norm_and_coef_from_local(comm, &mine.narrow(0, 0, 1)?, clip)
}

/// [`norm_and_coef`] from the norm of this rank's parts (one f32: `Ddp::parts_norm`, taken
/// by the reduce-scatters): its square all-reduced.
pub fn norm_and_coef_from_local(
    comm: &dyn Communicator,
    local: &Tensor,
    clip: f64,
) -> Result<Tensor> {
    let sumsq = local.sqr()?;
    comm.all_reduce(&sumsq, ReduceOp::Sum)?;
    let norm = sumsq.sqrt()?;
    let coef = match clip > 0.0 {
        true => norm
            .affine(1.0, 1e-6)?
            .recip()?
            .affine(clip, 0.0)?
            .minimum(1f64)?,
        false => norm.ones_like()?,
    };
    // 0·norm is 0, or NaN for an inf or NaN norm.
    let coef = (coef + norm.affine(0.0, 0.0)?)?;
    Ok(Tensor::cat(&[&norm, &coef], 0)?)
}

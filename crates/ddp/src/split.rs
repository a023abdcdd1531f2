//! Split mode ([`crate::DdpOptions::split`]): each bucket's all-reduce as its two halves,
//! apart in time (Megatron-Core's distributed optimizer does the same to its gradients,
//! then steps a shard; here every rank keeps every gradient and steps them all).
//! - The reduce-scatter goes out during the backward as ZeRO-1's does
//!   (`Communicator::reduce_scatter_deferred_async`; on NCCL at worlds 2 and 4 the copy
//!   engines move the parts and the adds run as they arrive, so the backward's GEMMs keep
//!   their SMs).
//! - After the backward the global norm comes from this rank's averaged parts (their sums
//!   of squares all-reduced: one scalar, [`norm_and_coef`]).
//! - Then every bucket's all-gather of the averaged parts is launched at once, and the
//!   replicated AdamW updates bucket by bucket, each waiting only for its own gather: the
//!   gathers run beside AdamW, not beside the backward.
//! - Or, where the copy engines gather (`DDP_SPLIT_EARLY`, by default at
//!   `memplan::DDP_SPLIT_EARLY_WORLDS`), each launch's gradients are gathered during the
//!   backward as soon as their sums are in (`Communicator::reduce_scatter_deferred_with`
//!   and `comm::Deferred::gather`, into one gather buffer), and AdamW runs alone after the norm, as on one GPU.
//!
//! Every rank ends with the same averaged gradients, as after an all-reduce.
//!
//! ```ignore
//! let mut d = Ddp::new(comm, &m, DdpOptions { split: true, ..DdpOptions::new(s) })?;
//! d.forward_backward(&m, &batch)?;          // reduce-scatters during the backward
//! let s = d.finish_split()?;                 // the compute stream waits for them
//! let nc = ddp::split::norm_and_coef(d.comm(), &s.parts(&d)?, clip)?;
//! for g in s.gather(&d)? {
//!     g.work.wait()?;                        // this bucket's gradients are whole
//!     // AdamW on g.grads
//! }
//! ```
//! [`Ddp::finish_gradient_synchronization`] does all of it and returns every gradient.

use crate::error::{DdpError, Result};
use crate::launch::{scaled, views, Prepared};
use crate::options::switch;
use crate::reducer::Ddp;
pub use crate::squares::{norm_and_coef, norm_and_coef_from_local};
use candle_core::Tensor;
use comm::{Communicator, Work};
use seam::Grads;

/// Every bucket reduce-scattered, by launch ([`Ddp::finish_split`]).
pub struct Scattered {
    launches: Vec<Vec<Prepared>>,
    /// By launch: its gathers left to after the norm (`Ddp::late_gather`).
    late: Vec<bool>,
    /// Gradients every rank computed averaged (`ddp::rows`), and this rank's parts of them.
    local: Vec<(usize, Tensor)>,
    local_parts: Vec<Tensor>,
    /// The micro-batch averaging factor not yet applied.
    scale: Option<f64>,
}

/// What a split Ddp reads and makes once, at its start ([`Ddp::split_setup`]).
#[derive(Default)]
pub(crate) struct SplitSetup {
    /// Each in-place gradient's gather buffer, by parameter (none: gathered where it lies).
    pub(crate) windows: Vec<Option<Tensor>>,
    /// Bytes a gather launch takes after the first bucket ([`gather_bytes`]).
    pub(crate) gather_bytes: usize,
    /// Whether each launch's gradients are gathered during the backward, as soon as their
    /// sums are in ([`early`]), rather than after the norm.
    pub(crate) early: bool,
}

/// One bucket's all-gather in flight, and its gradients (by parameter index, in their
/// shapes), whole once the compute stream has waited for `work`.
pub struct Gathered {
    pub work: Work,
    pub grads: Vec<(usize, Tensor)>,
}

impl Ddp {
    /// Whether the buckets are reduce-scattered: ZeRO's shards, or DDP's split all-reduce.
    pub(crate) fn scatters(&self) -> bool {
        self.opts.reduce_scatter || self.opts.split
    }

    /// Split mode: the gathers' grouping ([`gather_bytes`]) and, above one rank at
    /// `memplan::DDP_SPLIT_WINDOW_WORLDS` unless `DDP_SPLIT_WINDOWS` (1 or 0) says
    /// otherwise, a gather buffer for each gradient reduced in place
    /// (`Communicator::gather_buffer`: on NCCL a window, which its symmetric kernels or
    /// copy engines gather into), made in parameter order on every rank; the
    /// reduce-scatter sums into its chunk. Elsewhere the gradients are gathered where they
    /// lie.
    pub(crate) fn split_setup(&self) -> Result<SplitSetup> {
        let world = self.comm.world_size();
        let what = ("gather buffers", "the gradients gathered where they lie");
        let on = switch("DDP_SPLIT_WINDOWS", what)?
            .unwrap_or(memplan::DDP_SPLIT_WINDOW_WORLDS.contains(&world));
        if !self.opts.split {
            return Ok(SplitSetup::default());
        }
        let (gather_bytes, early) = (gather_bytes()?, early(world)? && world > 1);
        if world == 1 || !(on || early) {
            let windows = Vec::new();
            return Ok(SplitSetup {
                windows,
                gather_bytes,
                early,
            });
        }
        let dtype = self.opts.grad_dtype.unwrap_or(candle_core::DType::F32);
        let n = |i: usize| self.shapes[i].elem_count();
        let windows = match early {
            // One buffer (one window) for all: a launch's gathers go as one.
            true => self.one_gather_buffer(dtype)?,
            false => (0..self.shapes.len())
                .map(|i| match self.shards_in_place(i) {
                    true => Ok(Some(self.comm.gather_buffer(n(i), dtype, &self.device)?)),
                    false => Ok(None),
                })
                .collect::<Result<_>>()?,
        };
        Ok(SplitSetup {
            windows,
            gather_bytes,
            early,
        })
    }

    /// Every in-place gradient's gather buffer as a view of one buffer, each starting at a
    /// multiple of 1024 elements.
    fn one_gather_buffer(&self, dtype: candle_core::DType) -> Result<Vec<Option<Tensor>>> {
        let at = |n: usize| n.next_multiple_of(1024);
        let mut offsets = Vec::with_capacity(self.shapes.len());
        let mut end = 0;
        for i in 0..self.shapes.len() {
            offsets.push(self.shards_in_place(i).then_some(end));
            end += at(self.shapes[i].elem_count()) * usize::from(self.shards_in_place(i));
        }
        let all = self.comm.gather_buffer(end.max(1), dtype, &self.device)?;
        (offsets.iter().enumerate())
            .map(|(i, o)| match o {
                Some(o) => Ok(Some(all.narrow(0, *o, self.shapes[i].elem_count())?)),
                None => Ok(None),
            })
            .collect()
    }

    /// Split mode, after the synchronised backward: the compute stream waits for every
    /// bucket's reduce-scatter; the buckets, each rank holding its averaged part.
    pub fn finish_split(&mut self) -> Result<Scattered> {
        if !self.opts.split || (self.in_flight.is_empty() && self.local.is_empty()) {
            return Err(DdpError::Input(
                "finish_split: no backward of a split all-reduce in flight".into(),
            ));
        }
        let scale = self.scale.take();
        let (mut launches, mut beside) = (Vec::with_capacity(self.in_flight.len()), Vec::new());
        let mut late = Vec::with_capacity(self.in_flight.len());
        for f in std::mem::take(&mut self.in_flight) {
            beside.extend(self.beside_parts(&f)?);
            late.push(self.late_gather(f.stage));
            f.work.wait()?;
            let mut buckets = f.buckets;
            for p in &mut buckets {
                p.inputs.clear(); // summed into the gather buffers: freed in stream order
            }
            launches.push(buckets);
        }
        let local_parts = self.rows_parts()?;
        beside.extend(local_parts.iter().cloned());
        self.squares_finish(scale, beside)?;
        let local = std::mem::take(&mut self.local);
        Ok(Scattered {
            launches,
            late,
            local,
            local_parts,
            scale,
        })
    }

    /// Split mode's [`Ddp::finish_gradient_synchronization`]: every bucket gathered, the
    /// compute stream waiting for all.
    pub(crate) fn finish_split_all(&mut self) -> Result<Grads> {
        let mut out: Grads = vec![None; self.shapes.len()];
        let s = self.finish_split()?;
        for g in s.gather(self)? {
            g.work.wait()?;
            for (i, t) in g.grads {
                out[i] = Some(t);
            }
        }
        Ok(out)
    }
}

impl Scattered {
    /// This rank's averaged part of every gradient (each bucket's flat slice, then its
    /// chunks of the gradients reduced in place): the sum of their squares over the ranks
    /// is the squared norm of the averaged gradients.
    pub fn parts(&self, ddp: &Ddp) -> Result<Vec<Option<Tensor>>> {
        let mut out = Vec::new();
        for p in self.launches.iter().flatten() {
            for t in p.bufs() {
                out.push(Some(scaled(ddp.chunk_of(t)?, self.scale)?));
            }
        }
        out.extend(self.local_parts.iter().cloned().map(Some));
        Ok(out)
    }

    /// Launches the all-gathers of the averaged parts, in place: the smallest bucket
    /// first and alone (nothing hides the first gather: the first AdamW waits for it),
    /// then the others in the order of the backward (the last stages' buckets first),
    /// consecutive buckets together up to `DDP_SPLIT_GATHER_MB` a launch, read at the
    /// start (NCCL ran 25 MiB gathers at world 2 by its LL protocol, 18 ms for xl's 2 GB
    /// beside AdamW and a step of 51.2 ms, against 46.4 in groups of 100 MiB: calls
    /// 177-178).
    /// With the gathers in the backward (`DDP_SPLIT_EARLY`), only the flat buffers are left: one
    /// launch, and every gradient with it; then the launches that left their gathers to now
    /// (`ddp::tail`), all of their buffers in one launch, their AdamW last.
    pub fn gather(mut self, ddp: &Ddp) -> Result<Vec<Gathered>> {
        let local = Gathered {
            work: Work::completed(),
            grads: std::mem::take(&mut self.local),
        };
        let mut out = self.gather_buckets(ddp)?;
        if !local.grads.is_empty() {
            out.push(local);
        }
        Ok(out)
    }

    fn gather_buckets(self, ddp: &Ddp) -> Result<Vec<Gathered>> {
        let all = |p: &Prepared| p.bufs().cloned().collect::<Vec<_>>();
        if ddp.split_setup.early {
            let (mut now, mut late) = (Vec::new(), Vec::new());
            for (l, buckets) in self.late.iter().zip(self.launches) {
                match l {
                    true => late.extend(buckets),
                    false => now.extend(buckets),
                }
            }
            let flat = |p: &Prepared| p.buf.iter().cloned().collect::<Vec<_>>();
            let mut out = vec![gathered(ddp, now, flat, self.scale)?];
            if !late.is_empty() {
                out.push(gathered(ddp, late, all, self.scale)?);
            }
            return Ok(out);
        }
        let bytes = |p: &Prepared| {
            p.bufs()
                .map(|t| t.elem_count() * t.dtype().size_in_bytes())
                .sum::<usize>()
        };
        let mut buckets: Vec<Option<Prepared>> =
            self.launches.into_iter().flatten().map(Some).collect();
        let sizes: Vec<usize> = buckets.iter().flatten().map(bytes).collect();
        let grouped = groups(&sizes, ddp.split_setup.gather_bytes);
        let groups: Vec<Vec<Prepared>> = (grouped.into_iter())
            .map(|g| g.into_iter().filter_map(|k| buckets[k].take()).collect())
            .collect();
        (groups.into_iter())
            .map(|g| gathered(ddp, g, all, self.scale))
            .collect()
    }
}

/// `buckets`' gradients, once the gather of `bufs` of each (one launch, or none) is in.
fn gathered(
    ddp: &Ddp,
    buckets: Vec<Prepared>,
    bufs: impl Fn(&Prepared) -> Vec<Tensor>,
    scale: Option<f64>,
) -> Result<Gathered> {
    let pairs = (buckets.iter().flat_map(bufs))
        .map(|t| Ok((ddp.chunk_of(&t)?, t)))
        .collect::<Result<Vec<_>>>()?;
    let work = match pairs.is_empty() {
        true => Work::completed(),
        false => ddp.comm.all_gather_coalesced_async(&pairs)?,
    };
    let grads = views(ddp, buckets, scale)?;
    Ok(Gathered { work, grads })
}

/// The gathers of buckets of `sizes` bytes (in the backward's order), by bucket index: the
/// smallest alone first, then the others in order, consecutive ones together until a
/// group holds `group_bytes`.
fn groups(sizes: &[usize], group_bytes: usize) -> Vec<Vec<usize>> {
    let Some(first) = (0..sizes.len()).min_by_key(|&k| sizes[k]) else {
        return Vec::new();
    };
    let mut out = vec![vec![first]];
    let mut open = usize::MAX; // the first goes alone
    for k in (0..sizes.len()).filter(|&k| k != first) {
        match out.last_mut() {
            Some(g) if open < group_bytes => {
                open += sizes[k];
                g.push(k);
            }
            _ => {
                open = sizes[k];
                out.push(vec![k]);
            }
        }
    }
    out
}

/// Bytes of gradients a split all-reduce gathers in one launch (after the first bucket,
/// alone): `DDP_SPLIT_GATHER_MB` (MiB; 0: one bucket a launch), 100 MiB by default.
fn gather_bytes() -> Result<usize> {
    let what = "the MiB of gradients one gather launch takes";
    let mb = crate::options::mib("DDP_SPLIT_GATHER_MB", what)?.unwrap_or(100.0);
    Ok((mb * (1 << 20) as f64) as usize)
}

/// Whether a split all-reduce gathers during the backward: `DDP_SPLIT_EARLY` (1 or 0);
/// unset, at `memplan::DDP_SPLIT_EARLY_WORLDS`.
fn early(world: usize) -> Result<bool> {
    let what = (
        "each launch gathered during the backward, as soon as its sums are in",
        "the gathers after the norm, beside AdamW",
    );
    Ok(
        switch("DDP_SPLIT_EARLY", what)?
            .unwrap_or(memplan::DDP_SPLIT_EARLY_WORLDS.contains(&world)),
    )
}

/// Whether DDP splits its all-reduce: `DDP_SPLIT` (see [`asked`]); unset, on NCCL at
/// `memplan::DDP_SPLIT_WORLDS` (where the reduce-scatters go by the copy engines).
pub fn from_env(comm: &dyn Communicator) -> Result<bool> {
    let world = comm.world_size();
    Ok(asked()?.unwrap_or(comm.backend() == "nccl" && memplan::DDP_SPLIT_WORLDS.contains(&world)))
}

/// `DDP_SPLIT`: `Some(true)` for 1, `Some(false)` for 0, `None` unset; another value is an
/// error naming the variable.
pub fn asked() -> Result<Option<bool>> {
    let what = (
        "each all-reduce as a reduce-scatter in the backward and an all-gather",
        "the whole all-reduce in the backward",
    );
    switch("DDP_SPLIT", what)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_smallest_goes_alone_then_groups_fill_up_to_the_bytes() {
        let sizes = [30, 10, 5, 40, 60, 20];
        assert_eq!(
            super::groups(&sizes, 50),
            vec![vec![2], vec![0, 1, 3], vec![4], vec![5]]
        );
        // 0: one bucket a gather; everything in one group after the first.
        assert_eq!(super::groups(&sizes, 0).len(), 6);
        assert_eq!(super::groups(&sizes, usize::MAX).len(), 2);
        assert!(super::groups(&[], 50).is_empty());
    }
}

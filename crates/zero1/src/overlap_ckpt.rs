//! Checkpoints of [`Zero1Overlap`], in the sharded format of [`crate::checkpoint`]: each
//! rank lists the flat (declaration-order) runs its spans hold, so any world size, bucket
//! layout or other optimizer resumes them.

use crate::checkpoint;
use crate::error::{Result, Zero1Error};
use crate::overlap::Zero1Overlap;
use crate::zero::agree_on;
use candle_core::Tensor;
use comm::Communicator;
use ddp::DdpOptions;
use seam::{AdamWConfig, StagedModel};
use std::path::Path;
use std::sync::Arc;

impl Zero1Overlap {
    /// Where each span sits in the flat (declaration-order) parameters: its (start, len)
    /// runs in span order, and how many span elements they cover (the rest is a flat
    /// part's zero padding).
    fn span_runs(&self) -> Vec<(Vec<(usize, usize)>, usize)> {
        let offset = step::format::flat_offsets(self.shapes.iter().map(|s| s.elem_count()));
        let rank = self.comm.rank();
        (self.spans.iter().zip(&self.owner))
            .map(|(span, &(b, alone))| {
                if let Some(i) = alone {
                    return (vec![(offset[i] + span.at(), span.len)], span.len);
                }
                let (lo, hi) = (rank * span.len, (rank + 1) * span.len);
                let (mut runs, mut pos, mut covered) = (Vec::new(), 0usize, 0usize);
                let flat = self.ddp.buckets()[b].params.iter();
                for &i in flat.filter(|&&i| !self.ddp.shards_in_place(i)) {
                    let n = self.shapes[i].elem_count();
                    let (a, z) = (pos.max(lo), (pos + n).min(hi));
                    if a < z {
                        runs.push((offset[i] + a - pos, z - a));
                        covered += z - a;
                    }
                    pos += n;
                }
                (runs, covered)
            })
            .collect()
    }

    /// Writes a sharded checkpoint into `dir` (the format of [`crate::checkpoint`], with
    /// this rank's runs): every rank must call it; returns once all ranks have written and
    /// the manifest is durable.
    pub fn save(&mut self, dir: &Path) -> Result<()> {
        self.sync_params()?;
        let this = &*self;
        let dev = match this.spans.first() {
            Some(s) => s.var.device().clone(),
            None => return Err(Zero1Error::Input("save: no parameters".into())),
        };
        // Released masters gathered whole, one at a time (crate::masters).
        let whole = this.whole_params()?;
        checkpoint::save_tensors(
            this.comm.as_ref(),
            &dev,
            dir,
            &whole,
            this.opt.steps_taken(),
            || {
                // Each span's moment copied to the host alone, as the file is written.
                let layout = this.span_runs();
                let spans: Vec<(usize, usize)> =
                    (layout.iter().enumerate()).map(|(k, l)| (k, l.1)).collect();
                let runs = layout.into_iter().flat_map(|l| l.0).collect();
                let len = spans.iter().map(|s| s.1).sum();
                let pieces = |which| {
                    let each = spans.clone().into_iter().map(move |(k, covered)| {
                        let span = &this.spans[k];
                        let mut x = (this.opt.span_moment(k, span, which))
                            .map_err(|e| ::checkpoint::error::bad(dir, e))?
                            .unwrap_or_else(|| vec![0.0; span.len]);
                        x.truncate(covered);
                        Ok(Tensor::from_vec(x, covered, &candle_core::Device::Cpu)?)
                    });
                    ::checkpoint::Pieces::new(candle_core::DType::F32, len, each)
                };
                Ok(checkpoint::Moments {
                    runs,
                    exp_avg: pieces(seam::Moment::ExpAvg),
                    exp_avg_sq: pieces(seam::Moment::ExpAvgSq),
                })
            },
        )
    }

    /// Loads a checkpoint of [`Self::save`] or [`crate::Zero1::save`] (any world size and
    /// bucket layout, or consolidated) into `model`'s parameters and a new optimizer with
    /// the buckets of `opts` (a `Strategy`, or `DdpOptions`). The optimizer is built first
    /// (a collective: it checks the ranks' models agree and gives every rank rank 0's
    /// parameters), so that each rank reads only the moments of its own spans. Every file
    /// is validated before a parameter takes a checkpoint's value; a failure on any rank
    /// fails all.
    pub fn resume(
        comm: Arc<dyn Communicator>,
        model: &dyn StagedModel,
        opts: impl Into<DdpOptions>,
        cfg: AdamWConfig,
        dir: &Path,
    ) -> Result<Self> {
        let params = model.params().vars().to_vec();
        Self::resume_reading(comm, model, opts, cfg, |want| {
            checkpoint::read_all(dir, &params, want)
        })
    }

    /// [`Self::resume`] from a replicated optimizer's checkpoint (one rank, DDP:
    /// `ddp::checkpoint`'s one file in step directory `dir`), each rank reading the
    /// parameters and its own spans' moments.
    pub fn resume_replicated(
        comm: Arc<dyn Communicator>,
        model: &dyn StagedModel,
        opts: impl Into<DdpOptions>,
        cfg: AdamWConfig,
        dir: &Path,
    ) -> Result<Self> {
        Self::resume_reading(comm, model, opts, cfg, |want| {
            let (params, state) = step::format::flat::read_flat(dir, model, want)?;
            Ok((checkpoint::Params::Read(params), state))
        })
    }

    /// Builds the optimizer, has `read` read the parameters and the moments of the flat
    /// runs of its spans, agrees on the read across ranks, then sets both.
    fn resume_reading(
        comm: Arc<dyn Communicator>,
        model: &dyn StagedModel,
        opts: impl Into<DdpOptions>,
        cfg: AdamWConfig,
        read: impl FnOnce(
            &[(usize, usize)],
        )
            -> ::checkpoint::Result<(checkpoint::Params, checkpoint::Consolidated)>,
    ) -> Result<Self> {
        let params = model.params().vars().to_vec();
        let dev = params
            .first()
            .ok_or_else(|| Zero1Error::Input("Zero1Overlap::resume: no parameters".into()))?
            .device()
            .clone();
        let mut z = Self::new(comm.clone(), model, opts, cfg)?;
        let layout = z.span_runs();
        let want: Vec<(usize, usize)> = layout.iter().flat_map(|l| l.0.iter().copied()).collect();
        let read = read(&want).map_err(Zero1Error::from);
        let (loaded, state) = agree_on(comm.as_ref(), &dev, "resume", read)?;
        let set = loaded.set(&params).map_err(Zero1Error::from);
        agree_on(comm.as_ref(), &dev, "resume", set)?;
        z.refresh_masters()?;
        z.restore(&state, layout)?;
        Ok(z)
    }

    /// Each span's moments from `state` (its runs: `layout`, [`Self::span_runs`]), and its
    /// step count.
    fn restore(
        &mut self,
        state: &checkpoint::Consolidated,
        layout: Vec<(Vec<(usize, usize)>, usize)>,
    ) -> Result<()> {
        for (k, (runs, _)) in layout.into_iter().enumerate() {
            let n = self.spans[k].len;
            let (mut m, mut v) = (Vec::with_capacity(n), Vec::with_capacity(n));
            for (start, len) in runs {
                let (a, b) = state.moments(start, len)?;
                m.extend(a);
                v.extend(b);
            }
            m.resize(n, 0.0);
            v.resize(n, 0.0);
            let span = self.spans[k].clone();
            self.opt.restore_span(state.step, k, &span, &m, &v)?;
        }
        Ok(())
    }

    /// Cuts each flat bucket's master again from the parameters (after they were set: a
    /// master sharded in place is its parameter already).
    fn refresh_masters(&mut self) -> Result<()> {
        let w = self.comm.world_size();
        for (k, &(b, alone)) in self.owner.iter().enumerate() {
            if alone.is_some() {
                continue;
            }
            let flat: Vec<usize> = (self.ddp.buckets()[b].params.iter().copied())
                .filter(|&i| !self.ddp.shards_in_place(i))
                .collect();
            let f = crate::gather::bucket_flat(&self.params, &flat, w)?;
            let chunk = f.elem_count() / w;
            let span = &self.spans[k];
            span.var
                .set(&f.narrow(0, self.comm.rank() * chunk, chunk)?)?;
        }
        Ok(())
    }
}

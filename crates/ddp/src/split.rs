//! Split mode ([`crate::DdpOptions::split`]): each bucket's all-reduce run as its two
//! halves, at two places in the step. The reduce-scatter runs during the backward, as
//! ZeRO-1's does; the all-gather of the averaged gradients runs after it, beside AdamW
//! (memory-bound), which updates each launch's parameters as soon as their gather lands.
//! Every rank still keeps the whole optimizer state and computes the same bits: this is
//! DDP, with half of its bytes moved from beside the backward's GEMMs to beside AdamW.
//!
//! ```ignore
//! let o = DdpOptions { split: true, ..DdpOptions::new(Strategy::Bucketed { bucket_mb: 25.0 }) };
//! let mut ddp = Ddp::new(comm, &model, o)?;
//! ddp.forward_backward(&model, &batch)?;                 // reduce-scatters during backward
//! let (norm, g) = ddp.finish_split(|shards| norm_of(shards))?; // gathers launched
//! opt.set_grad_scale(norm);
//! g.step(&mut opt, model.params())?;                     // AdamW launch by launch
//! ```

use crate::error::{DdpError, Result};
use crate::launch::{scaled, InFlight, Prepared};
use crate::reducer::Ddp;
use candle_core::Tensor;
use comm::Work;
use seam::{AdamW, Grads, ParamSet};

/// The averaged gradients of a split step, whole once their gathers land: one entry per
/// launch of the backward, in launch order (the last stages' buckets first).
pub struct GradientGathers {
    launches: Vec<(Option<Work>, Vec<usize>)>,
    /// By parameter index: views of the buffers the gathers write.
    grads: Grads,
}

impl Ddp {
    /// Whether this Ddp runs in split mode (asked for, and more than one rank).
    pub fn splits(&self) -> bool {
        self.opts.split
    }

    /// Split mode, after the backward: makes the compute stream wait for the backward's
    /// reduce-scatters, runs `before(shards)` on this rank's averaged part of every
    /// gradient (the flat buffers' slices with their zero padding, then the chunks of the
    /// gradients sharded in place: a norm's place, before any gather is queued), then
    /// launches each launch's all-gathers on the communication stream.
    pub fn finish_split<T, E: From<DdpError>>(
        &mut self,
        before: impl FnOnce(&[Tensor]) -> std::result::Result<T, E>,
    ) -> std::result::Result<(T, GradientGathers), E> {
        let (shards, launches, grads) = self.reduced_parts()?;
        let t = before(&shards)?;
        let c = self.comm.as_ref();
        let launch = |(pairs, params): (Vec<(Tensor, Tensor)>, _)| -> Result<_> {
            Ok((Some(c.all_gather_coalesced_async(&pairs)?), params))
        };
        let launches = launches.into_iter().map(launch).collect::<Result<_>>()?;
        Ok((t, GradientGathers { launches, grads }))
    }

    /// [`Self::finish_split`] up to the gathers: this rank's parts, each launch's (part,
    /// whole) pairs and parameters, and the gradients as views of the wholes.
    #[allow(clippy::type_complexity)]
    fn reduced_parts(
        &mut self,
    ) -> Result<(Vec<Tensor>, Vec<(Vec<(Tensor, Tensor)>, Vec<usize>)>, Grads)> {
        if !self.opts.split || self.in_flight.is_empty() {
            return Err(DdpError::Input(
                "finish_split: no backward of a split Ddp in flight".into(),
            ));
        }
        let scale = self.scale.take();
        let n = self.shapes.len();
        let mut launches = Vec::new();
        let (mut shards, mut grads): (Vec<Tensor>, Grads) = (Vec::new(), vec![None; n]);
        for f in std::mem::take(&mut self.in_flight) {
            let InFlight { buckets, work, .. } = f;
            work.wait()?;
            let mut pairs = Vec::new();
            let mut params = Vec::new();
            for p in buckets {
                // The micro-batch factor goes on the part this rank sends: the gathered
                // gradients are the final ones.
                for whole in p.bufs() {
                    let part = scaled(self.chunk_of(whole)?, scale)?;
                    shards.push(part.clone());
                    pairs.push((part, whole.flatten_all()?));
                }
                for (i, g) in self.views(p, None)? {
                    params.push(i);
                    grads[i] = Some(g);
                }
            }
            launches.push((pairs, params));
        }
        Ok((shards, launches, grads))
    }

    /// A launched bucket's gradients by parameter index, in their shapes, times `scale`
    /// where given: the ones reduced in place, then views of its flat buffer (its padding
    /// left out).
    pub(crate) fn views(&self, p: Prepared, scale: Option<f64>) -> Result<Vec<(usize, Tensor)>> {
        let alone: Vec<usize> = p.in_place.iter().map(|(i, _)| *i).collect();
        let mut out = Vec::with_capacity(self.buckets[p.bucket].params.len());
        for (i, g) in p.in_place {
            out.push((i, scaled(g.reshape(self.shapes[i].clone())?, scale)?));
        }
        let Some(buf) = p.buf else { return Ok(out) };
        let buf = scaled(buf, scale)?;
        let mut off = 0;
        let flat = self.buckets[p.bucket].params.iter();
        for &i in flat.filter(|i| !alone.contains(i)) {
            let n = self.shapes[i].elem_count();
            out.push((i, buf.narrow(0, off, n)?.reshape(self.shapes[i].clone())?));
            off += n;
        }
        Ok(out)
    }
}

impl GradientGathers {
    /// AdamW over `params` (writing their bf16 copies where enabled), launch by launch:
    /// the compute stream waits for a launch's gathers right before its first update, so
    /// the gathers after it overlap the updates before them.
    pub fn step(mut self, opt: &mut AdamW, params: &ParamSet) -> Result<()> {
        let mut order: Vec<usize> = Vec::with_capacity(params.len());
        // wait_after[i]: the launch to wait for once parameter i's update is queued.
        let mut wait_after = vec![None; params.len()];
        for (k, (_, ps)) in self.launches.iter().enumerate() {
            let last = ps.iter().rev().find(|&&i| self.grads[i].is_some());
            if let (Some(&i), true) = (last, k + 1 < self.launches.len()) {
                wait_after[i] = Some(k + 1);
            }
            order.extend(ps);
        }
        let mut seen = vec![false; params.len()];
        order.iter().for_each(|&i| seen[i] = true);
        order.extend((0..params.len()).filter(|&i| !seen[i]));
        if let Some(w) = self.launches.first_mut().and_then(|l| l.0.take()) {
            w.wait()?;
        }
        let launches = &mut self.launches;
        opt.step_params_in(params, &self.grads, order, |i| -> Result<()> {
            if let Some(w) = wait_after[i].and_then(|k| launches[k].0.take()) {
                w.wait()?;
            }
            Ok(())
        })?;
        // A launch whose parameters all lacked a gradient is still in flight.
        for (w, _) in &mut self.launches {
            if let Some(w) = w.take() {
                w.wait()?;
            }
        }
        Ok(())
    }
}

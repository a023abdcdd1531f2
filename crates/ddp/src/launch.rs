//! How [`crate::Ddp`] launches its buckets: [`prepare`] copies (and casts) a bucket's
//! gradients into one flat buffer in the communication dtype, except large ones already in
//! that dtype, which are reduced where they lie ([`IN_PLACE_MIN`]); [`launch_all`] launches
//! the buckets that became ready together, one collective each or, with
//! `DdpOptions::coalesce`, one coalesced launch; [`InFlight`] keeps them until they are
//! collected ([`InFlight::collect`]; all of them:
//! [`Ddp::finish_gradient_synchronization`], or in reduce-scatter mode
//! `Ddp::finish_reduce_scatter` in scatter.rs).

use crate::error::{DdpError, Result};
use crate::reducer::Ddp;
use candle_core::{DType, Tensor};
use comm::{ReduceOp, Work};
use seam::Grads;

/// Gradients at least this large, contiguous and already in the communication dtype are
/// reduced where they lie (PyTorch's `gradient_as_bucket_view`, without the copy: the
/// bucket becomes a group of in-place collectives); smaller ones are copied into the
/// bucket's flat buffer, so that many small gradients cost one collective (on one rank
/// every gradient goes alone: there is no message to batch). In reduce-scatter mode a
/// gradient this large whose size the world size divides is reduce-scattered in place,
/// each rank keeping its chunk ([`crate::Ddp::shards_in_place`]).
pub(crate) const IN_PLACE_MIN: usize = 1 << 16;

/// A bucket ready to launch: its flat buffer in the communication dtype (the gradients
/// not reduced in place, in bucket order), the gradients reduced in place (by parameter
/// index) and, in reduce-scatter mode, the buffer for this rank's slice.
pub(crate) struct Prepared {
    pub(crate) bucket: usize,
    pub(crate) buf: Option<Tensor>,
    pub(crate) in_place: Vec<(usize, Tensor)>,
    /// A split all-reduce's gradients reduced in place, summed into the gather buffers
    /// that `in_place` then holds (ddp::split), in `in_place`'s order; empty otherwise.
    pub(crate) inputs: Vec<Tensor>,
    /// Released gradients (ZeRO-2, FSDP) above one rank: the buffer each in-place
    /// gradient's chunk is reduce-scattered into, in `in_place`'s order, so that the
    /// gradient is freed once its launch is collected without a copy of the chunk; empty
    /// otherwise (the chunk lands in the gradient).
    pub(crate) outs: Vec<Tensor>,
    pub(crate) shard: Option<Tensor>,
}

impl Prepared {
    /// Every buffer the bucket's collective writes.
    pub(crate) fn bufs(&self) -> impl Iterator<Item = &Tensor> {
        self.buf.iter().chain(self.in_place.iter().map(|(_, t)| t))
    }
}

/// Stages of backward between launching a bucket and making the compute stream wait for
/// its reduce ([`Ddp::forward_backward_reduced`]): time for the collective to finish.
pub const REDUCE_LAG: usize = 2;

/// Adds one launch to the step's counters.
pub(crate) fn count(stats: &mut crate::reducer::SyncStats, f: &InFlight) {
    stats.collectives += f.buckets.len();
    stats.launches += 1;
    stats.bytes += (f.buckets.iter().flat_map(|p| p.bufs()))
        .map(|b| b.elem_count() * b.dtype().size_in_bytes())
        .sum::<usize>();
}

/// One launch in flight: its buckets (one, or several coalesced), their handle, and the
/// backward stage that launched them (`None`: after the backward).
pub(crate) struct InFlight {
    pub(crate) buckets: Vec<Prepared>,
    pub(crate) work: Work,
    pub(crate) stage: Option<usize>,
    /// Launched beside the others (`ddp::tail`): its norm is taken from its parts.
    pub(crate) beside: bool,
}

impl InFlight {
    /// Waits for the launch (the compute stream waits; the host does not block on the
    /// GPU) and returns its buckets' averaged gradients by parameter index, in the
    /// communication dtype (views of the flat buffers), times `scale` where given.
    pub(crate) fn collect(self, ddp: &Ddp, scale: Option<f64>) -> Result<Vec<(usize, Tensor)>> {
        self.work.wait()?;
        views(ddp, self.buckets, scale)
    }
}

/// The gradients of `buckets`, reduced, by parameter index: the in-place ones in their
/// shapes, the others views of the flat buffers; times `scale` where given.
pub(crate) fn views(
    ddp: &Ddp,
    buckets: Vec<Prepared>,
    scale: Option<f64>,
) -> Result<Vec<(usize, Tensor)>> {
    let mut out = Vec::new();
    for p in buckets {
        let alone: Vec<usize> = p.in_place.iter().map(|(i, _)| *i).collect();
        for (i, g) in p.in_place {
            out.push((i, scaled(g.reshape(ddp.shapes[i].clone())?, scale)?));
        }
        let Some(buf) = p.buf else { continue };
        let buf = scaled(buf, scale)?;
        let mut off = 0;
        for &i in ddp.buckets[p.bucket]
            .params
            .iter()
            .filter(|i| !alone.contains(i))
        {
            let n = ddp.shapes[i].elem_count();
            out.push((i, buf.narrow(0, off, n)?.reshape(ddp.shapes[i].clone())?));
            off += n;
        }
    }
    Ok(out)
}

impl Ddp {
    /// Waits for every launched all-reduce (the compute stream waits; the host does not
    /// block on GPU) and returns the averaged gradients by parameter index, in the
    /// communication dtype (bf16 views stay bf16: AdamW reads them without a cast).
    pub fn finish_gradient_synchronization(&mut self) -> Result<Grads> {
        if self.opts.split {
            return self.finish_split_all();
        }
        if self.opts.reduce_scatter {
            return Err(DdpError::Input(
                "finish_gradient_synchronization: this Ddp reduce-scatters; use finish_reduce_scatter"
                    .into(),
            ));
        }
        if self.in_flight.is_empty() && self.local.is_empty() {
            return Err(DdpError::Input(
                "finish_gradient_synchronization called with no synchronised backward in flight"
                    .into(),
            ));
        }
        let mut out: Grads = vec![None; self.shapes.len()];
        for (i, g) in std::mem::take(&mut self.local) {
            out[i] = Some(g);
        }
        let scale = self.scale.take();
        for f in std::mem::take(&mut self.in_flight) {
            for (i, g) in f.collect(self, scale)? {
                out[i] = Some(g);
            }
        }
        Ok(out)
    }
}

/// Launches buckets `bs` (ready together, at backward stage `stage`): one launch each, or
/// with [`DdpOptions::coalesce`] one coalesced launch for all; appends them to `launched`.
pub(crate) fn launch_all(
    ddp: &Ddp,
    (bs, stage): (&[usize], Option<usize>),
    grads: &mut Grads,
    acc: Option<(&Grads, Option<f64>)>,
    launched: &mut Vec<InFlight>,
) -> Result<()> {
    let prepared = bs
        .iter()
        .map(|&b| prepare(ddp, b, grads, acc))
        .collect::<Result<Vec<_>>>()?;
    if ddp.opts.coalesce && prepared.len() > 1 {
        launched.push(launch(ddp, prepared, stage)?);
    } else {
        for p in prepared {
            launched.push(launch(ddp, vec![p], stage)?);
        }
    }
    Ok(())
}

/// Launches the buckets' all-reduces (average), or reduce-scatters in that mode: one
/// collective for one bucket, a coalesced one for several.
fn launch(ddp: &Ddp, buckets: Vec<Prepared>, stage: Option<usize>) -> Result<InFlight> {
    let c = ddp.comm.as_ref();
    let beside = ddp.beside(stage);
    let work = if ddp.scatters() {
        let (mut pairs, mut whole) = (Vec::new(), Vec::new());
        // Split DDP's gathers in the backward, unless this launch leaves its own to after
        // the norm (`ddp::tail`): then its in-place gradients go as the others' parts.
        let early = ddp.split_setup.early && !ddp.late_gather(stage);
        for p in &buckets {
            if p.buf.is_some() {
                pairs.push((flat(p)?.clone(), shard(p)?.clone()));
            }
            for (k, (_, g)) in p.in_place.iter().enumerate() {
                // In place: this rank's chunk of the gradient receives its average (split:
                // of its gather buffer, from the gradient; early: then all of it).
                let input = p.inputs.get(k).unwrap_or(g);
                match early && k < p.inputs.len() {
                    true => whole.push((input.clone(), g.clone())),
                    false => {
                        let out = p.outs.get(k).cloned();
                        pairs.push((input.clone(), out.map_or_else(|| ddp.chunk_of(g), Ok)?))
                    }
                }
            }
        }
        let whole = match whole.is_empty() {
            true => None,
            false => {
                let with = comm::Deferred {
                    gather: true,
                    norm: ddp.norm_slot(&whole)?,
                    beside: false,
                };
                Some(c.reduce_scatter_deferred_with(&whole, ReduceOp::Avg, &with)?)
            }
        };
        // Deferred (`Ddp::deferred`): waited for after the backward, or with released
        // gradients (ZeRO-2, FSDP) `REDUCE_LAG` stages after the launch; comm's copy-engine
        // reduce-scatters add each launch's parts as they arrive either way.
        let parts = match &pairs[..] {
            [] if whole.is_some() => Work::completed(),
            _ if ddp.deferred => {
                let with = comm::Deferred {
                    gather: false,
                    norm: match beside {
                        true => None,
                        false => ddp.norm_slot(&pairs)?,
                    },
                    beside,
                };
                c.reduce_scatter_deferred_with(&pairs, ReduceOp::Avg, &with)?
            }
            [(i, o)] => c.reduce_scatter_async(i, o, ReduceOp::Avg)?,
            _ => c.reduce_scatter_coalesced_async(&pairs, ReduceOp::Avg)?,
        };
        Work::all(whole.into_iter().chain([parts]).collect())
    } else {
        let bufs: Vec<Tensor> = buckets.iter().flat_map(|p| p.bufs()).cloned().collect();
        match &bufs[..] {
            [b] => c.all_reduce_async(b, ReduceOp::Avg)?,
            _ => c.all_reduce_coalesced_async(&bufs, ReduceOp::Avg)?,
        }
    };
    Ok(InFlight {
        buckets,
        work,
        stage,
        beside,
    })
}

fn flat(p: &Prepared) -> Result<&Tensor> {
    p.buf
        .as_ref()
        .ok_or_else(|| DdpError::Input("reduce-scatter bucket without a flat buffer".into()))
}

fn shard(p: &Prepared) -> Result<&Tensor> {
    p.shard
        .as_ref()
        .ok_or_else(|| DdpError::Input("reduce-scatter bucket without a shard buffer".into()))
}

/// Gathers bucket `b`'s gradients (plus accumulated ones, times their averaging factor
/// where given, in the same pass; taken out of `grads`) into one buffer in the
/// communication dtype (and, in reduce-scatter mode, zero-pads it to a multiple of the
/// world size and allocates this rank's slice).
fn prepare(
    ddp: &Ddp,
    b: usize,
    grads: &mut Grads,
    acc: Option<(&Grads, Option<f64>)>,
) -> Result<Prepared> {
    let (acc, fold) = match acc {
        Some((a, s)) => (Some(a), s),
        None => (None, None),
    };
    let times = |t: Tensor| -> Result<Tensor> {
        Ok(match fold {
            Some(s) => t.to_dtype(DType::F32)?.affine(s, 0.0)?,
            None => t,
        })
    };
    let bucket = &ddp.buckets[b];
    let dtype = ddp.opts.grad_dtype.unwrap_or(DType::F32);
    let dev = ddp.device.clone();
    let mut parts = Vec::with_capacity(bucket.params.len() + 1);
    let (mut in_place_grads, mut inputs) = (Vec::new(), Vec::new());
    // The wire's dtype where anything is sent. On one rank nothing is (the collective is
    // the identity): a gradient reduced alone keeps its own dtype, so no cast runs and the
    // step computes what one process computes.
    let wire = (ddp.comm.world_size() > 1).then_some(dtype);
    for &i in &bucket.params {
        let g = match (grads[i].take(), acc.and_then(|a| a[i].as_ref())) {
            // Sent in bf16: the sum and the cast in one pass (the sum is not kept).
            (Some(g), Some(a)) if wire == Some(DType::BF16) && a.dtype() == DType::F32 => {
                seam::accum::sum_new_as(a, &g, fold, DType::BF16)?
            }
            // The accumulated sum is this step's own buffer: added to in place.
            (Some(g), Some(a)) => {
                seam::accum::accumulate(a, &g, fold)?;
                a.clone()
            }
            (Some(g), None) => times(g)?,
            (None, Some(a)) => times(a.clone())?,
            (None, None) if ddp.opts.find_unused_parameters => {
                Tensor::zeros(ddp.shapes[i].clone(), DType::F32, &dev)?
            }
            (None, None) => {
                let (name, stage) = &ddp.names[i];
                return Err(DdpError::Input(format!(
                    "parameter {name} got no gradient from stage {stage}'s backward (the first stage that lists it): it is listed under the wrong stage or unused in this step; set DdpOptions::find_unused_parameters to train with unused parameters (their gradient taken as zero)"
                )));
            }
        };
        let alone = wire.unwrap_or(g.dtype());
        if ddp.scatters() {
            match ddp.shards_in_place(i) {
                // Sharded where it lies (converted first where it is not in the wire dtype).
                true => {
                    let g = g.flatten_all()?.to_dtype(alone)?.contiguous()?;
                    match ddp.split_setup.windows.get(i).cloned().flatten() {
                        Some(w) => {
                            inputs.push(g);
                            in_place_grads.push((i, w));
                        }
                        None => in_place_grads.push((i, g)),
                    }
                }
                false => parts.push(g.flatten_all()?.to_dtype(dtype)?),
            }
            continue;
        }
        let in_place = g.dtype() == alone && ddp.goes_alone(g.elem_count()) && g.is_contiguous();
        match in_place {
            true => in_place_grads.push((i, g)),
            false => parts.push(g.flatten_all()?.to_dtype(dtype)?),
        }
    }
    let w = ddp.comm.world_size();
    let flat_numel: usize = parts.iter().map(|t| t.elem_count()).sum();
    let pad = (w - flat_numel % w) % w;
    if ddp.scatters() && pad > 0 {
        parts.push(Tensor::zeros(pad, dtype, &dev)?);
    }
    let buf = match parts.len() {
        0 => None,
        1 => Some(parts.pop().expect("one part").contiguous()?),
        _ => Some(Tensor::cat(&parts, 0)?),
    };
    // In-place flat shard: this rank's chunk of the flat buffer.
    let shard = match (ddp.scatters(), &buf) {
        (true, Some(buf)) => Some(ddp.chunk_of(buf)?),
        _ => None,
    };
    let outs = match ddp.scatters() && ddp.opts.release_gradients && w > 1 {
        true => (in_place_grads.iter())
            .map(|(_, g)| seam::span::received(g.elem_count() / w, g.dtype(), &dev))
            .collect::<seam::Result<_>>()?,
        false => Vec::new(),
    };
    Ok(Prepared {
        bucket: b,
        buf,
        in_place: in_place_grads,
        inputs,
        outs,
        shard,
    })
}

/// `t` times the micro-batch averaging factor, if any (as it is without one).
pub(crate) fn scaled(t: Tensor, scale: Option<f64>) -> Result<Tensor> {
    Ok(match scale {
        Some(s) => (t * s)?,
        None => t,
    })
}

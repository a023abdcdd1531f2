//! How [`crate::Ddp`] launches its buckets: [`prepare`] copies (and casts) a bucket's
//! gradients into one flat buffer in the communication dtype (a one-gradient bucket
//! already in that dtype is used in place); [`launch_all`] launches the buckets that
//! became ready together, one collective each or, with `DdpOptions::coalesce`, one
//! coalesced launch; [`InFlight`] keeps them until they are collected.

use crate::error::{DdpError, Result};
use crate::reducer::Ddp;
use candle_core::{DType, Tensor};
use comm::{ReduceOp, Work};
use seam::Grads;

/// A bucket ready to launch: its flat buffer in the communication dtype and, in
/// reduce-scatter mode, the buffer for this rank's slice.
pub(crate) struct Prepared {
    pub(crate) bucket: usize,
    pub(crate) buf: Tensor,
    pub(crate) shard: Option<Tensor>,
}

/// One launch in flight: its buckets (one, or several coalesced) and their handle.
pub(crate) struct InFlight {
    pub(crate) buckets: Vec<Prepared>,
    pub(crate) work: Work,
}

/// Launches buckets `bs` (ready together): one launch each, or with
/// [`DdpOptions::coalesce`] one coalesced launch for all; appends them to `launched`.
pub(crate) fn launch_all(
    ddp: &Ddp,
    bs: &[usize],
    grads: &mut Grads,
    acc: Option<&Grads>,
    launched: &mut Vec<InFlight>,
) -> Result<()> {
    let prepared = bs
        .iter()
        .map(|&b| prepare(ddp, b, grads, acc))
        .collect::<Result<Vec<_>>>()?;
    if ddp.opts.coalesce && prepared.len() > 1 {
        launched.push(launch(ddp, prepared)?);
    } else {
        for p in prepared {
            launched.push(launch(ddp, vec![p])?);
        }
    }
    Ok(())
}

/// Launches the buckets' all-reduces (average), or reduce-scatters in that mode: one
/// collective for one bucket, a coalesced one for several.
fn launch(ddp: &Ddp, buckets: Vec<Prepared>) -> Result<InFlight> {
    let c = ddp.comm.as_ref();
    let work = match (&buckets[..], ddp.opts.reduce_scatter) {
        ([p], false) => c.all_reduce_async(&p.buf, ReduceOp::Avg)?,
        ([p], true) => c.reduce_scatter_async(&p.buf, shard(p)?, ReduceOp::Avg)?,
        (ps, false) => {
            let bufs: Vec<Tensor> = ps.iter().map(|p| p.buf.clone()).collect();
            c.all_reduce_coalesced_async(&bufs, ReduceOp::Avg)?
        }
        (ps, true) => {
            let pairs = ps
                .iter()
                .map(|p| Ok((p.buf.clone(), shard(p)?.clone())))
                .collect::<Result<Vec<_>>>()?;
            c.reduce_scatter_coalesced_async(&pairs, ReduceOp::Avg)?
        }
    };
    Ok(InFlight { buckets, work })
}

fn shard(p: &Prepared) -> Result<&Tensor> {
    p.shard
        .as_ref()
        .ok_or_else(|| DdpError::Input("reduce-scatter bucket without a shard buffer".into()))
}

/// Gathers bucket `b`'s gradients (plus accumulated ones; taken out of `grads`) into one
/// buffer in the communication dtype (and, in reduce-scatter mode, zero-pads it to a
/// multiple of the world size and allocates this rank's slice).
fn prepare(ddp: &Ddp, b: usize, grads: &mut Grads, acc: Option<&Grads>) -> Result<Prepared> {
    let bucket = &ddp.buckets[b];
    let dtype = ddp.opts.grad_dtype.unwrap_or(DType::F32);
    let dev = ddp.device.clone();
    let mut parts = Vec::with_capacity(bucket.params.len() + 1);
    for &i in &bucket.params {
        let g = match (grads[i].take(), acc.and_then(|a| a[i].as_ref())) {
            (Some(g), Some(a)) => (g.to_dtype(DType::F32)? + a)?,
            (Some(g), None) => g,
            (None, Some(a)) => a.clone(),
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
        parts.push(g.flatten_all()?.to_dtype(dtype)?);
    }
    let w = ddp.comm.world_size();
    let pad = (w - bucket.numel % w) % w;
    if ddp.opts.reduce_scatter && pad > 0 {
        parts.push(Tensor::zeros(pad, dtype, &dev)?);
    }
    let buf = if parts.len() == 1 {
        parts.pop().expect("one part").contiguous()?
    } else {
        Tensor::cat(&parts, 0)?
    };
    let shard = match ddp.opts.reduce_scatter {
        true => Some(Tensor::zeros(buf.elem_count() / w, dtype, &dev)?),
        false => None,
    };
    Ok(Prepared {
        bucket: b,
        buf,
        shard,
    })
}

//! [`Zero1Overlap`]: ZeRO stage 1 through the ddp crate's buckets, so gradient
//! communication overlaps backward. A [`Ddp`] in reduce-scatter mode launches each
//! bucket's reduce-scatter (Avg) from the staged backward as soon as its gradients are
//! final; rank r receives the r-th slice of every (zero-padded) bucket. The rank keeps f32
//! master copies and AdamW moments of exactly those slices, steps them, and all-gathers
//! every bucket back into the parameters. Communication volume equals DDP's all-reduce
//! (reduce-scatter + all-gather); optimizer state is 1/W of DDP's.
//!
//! ```ignore
//! let mut z = Zero1Overlap::new(comm.clone(), &model, Strategy::Bucketed { bucket_mb: 25.0 }, cfg)?;
//! let loss = z.forward_backward(&model, &local_batch)?; // reduce-scatters during backward
//! z.step()?;                                           // AdamW on the shard, all-gather
//! ```

use crate::error::{Result, Zero1Error};
use candle_core::{DType, Tensor, Var};
use comm::{Communicator, Work};
use ddp::{Ddp, DdpOptions, Strategy};
use model::{AdamW, AdamWConfig, Batch, StagedModel};
use std::sync::Arc;

pub struct Zero1Overlap {
    comm: Arc<dyn Communicator>,
    ddp: Ddp,
    params: Vec<Var>,
    /// Per bucket: this rank's slice of the bucket's flat parameters (f32 master).
    masters: Vec<Var>,
    opt: AdamW,
}

/// Bucket `b`'s parameters flattened in bucket order and zero-padded to a multiple of `w`.
fn bucket_flat(params: &[Var], idx: &[usize], w: usize) -> Result<Tensor> {
    let mut parts: Vec<Tensor> = idx
        .iter()
        .map(|&i| params[i].as_tensor().flatten_all())
        .collect::<candle_core::Result<_>>()?;
    let n: usize = parts.iter().map(|t| t.elem_count()).sum();
    let pad = (w - n % w) % w;
    if pad > 0 {
        parts.push(Tensor::zeros(pad, DType::F32, parts[0].device())?);
    }
    Ok(Tensor::cat(&parts, 0)?)
}

impl Zero1Overlap {
    /// Builds the reduce-scattering Ddp (which checks that every rank has the same model
    /// and broadcasts rank 0's parameters), then this rank's master slices.
    pub fn new(
        comm: Arc<dyn Communicator>,
        model: &dyn StagedModel,
        strategy: Strategy,
        cfg: AdamWConfig,
    ) -> Result<Self> {
        let params = model.params().vars().to_vec();
        if let Some(i) = params.iter().position(|p| p.dtype() != DType::F32) {
            return Err(Zero1Error::Input(format!(
                "Zero1Overlap: parameter {i} is {:?}; master weights must be f32",
                params[i].dtype()
            )));
        }
        let opts = DdpOptions {
            reduce_scatter: true,
            ..DdpOptions::new(strategy)
        };
        let ddp = Ddp::new(comm.clone(), model, opts)?;
        let (w, r) = (comm.world_size(), comm.rank());
        let masters = ddp
            .buckets()
            .iter()
            .map(|b| {
                let flat = bucket_flat(&params, &b.params, w)?;
                let chunk = flat.elem_count() / w;
                Ok(Var::from_tensor(
                    &flat.narrow(0, r * chunk, chunk)?.copy()?,
                )?)
            })
            .collect::<Result<_>>()?;
        Ok(Self {
            comm,
            ddp,
            params,
            masters,
            opt: AdamW::new(cfg)?,
        })
    }

    /// Forward and backward on this rank's batch; the buckets' reduce-scatters are
    /// launched during backward. Returns this rank's loss.
    pub fn forward_backward(&mut self, model: &dyn StagedModel, batch: &Batch) -> Result<Tensor> {
        Ok(self.ddp.forward_backward(model, batch)?)
    }

    /// Collects the averaged gradient slices, steps AdamW on them, and all-gathers every
    /// bucket into the parameters (identical on every rank afterwards).
    pub fn step(&mut self) -> Result<()> {
        let shards: Vec<Option<Tensor>> = self
            .ddp
            .finish_reduce_scatter()?
            .into_iter()
            .map(Some)
            .collect();
        // Each bucket's all-gather is launched as soon as its AdamW update is queued, so
        // it overlaps the updates of the buckets after it.
        let (comm, masters) = (&self.comm, &self.masters);
        let w = comm.world_size();
        let mut gathers: Vec<(Tensor, Work)> = Vec::with_capacity(masters.len());
        let mut failed: Option<Zero1Error> = None;
        self.opt
            .step_each(masters, &shards, |b| {
                let m = &masters[b];
                let launched = Tensor::zeros(m.elem_count() * w, DType::F32, m.device())
                    .map_err(Zero1Error::from)
                    .and_then(|out| {
                        let work = comm.all_gather_async(m.as_tensor(), &out)?;
                        Ok((out, work))
                    });
                match launched {
                    Ok(g) => gathers.push(g),
                    Err(e) => {
                        let msg = e.to_string();
                        failed = Some(e);
                        return Err(model::ModelError::Input(msg));
                    }
                }
                Ok(())
            })
            .map_err(|e| failed.take().unwrap_or(e.into()))?;
        drop(shards);
        for ((out, work), b) in gathers.into_iter().zip(self.ddp.buckets()) {
            work.wait()?;
            let mut off = 0;
            for &i in &b.params {
                let p = &self.params[i];
                let n = p.elem_count();
                p.set(&out.narrow(0, off, n)?.reshape(p.shape())?)?;
                off += n;
            }
        }
        Ok(())
    }

    /// Elements of optimizer state (and master weights) this rank keeps.
    pub fn state_elements(&self) -> usize {
        self.masters.iter().map(|m| m.elem_count()).sum()
    }

    pub fn ddp(&self) -> &Ddp {
        &self.ddp
    }
}

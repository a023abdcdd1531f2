//! [`Zero1`]: ZeRO stage 1 (Rajbhandari et al. 2020). The parameters are laid out as one
//! flat f32 vector (declaration order, zero-padded to a multiple of the world size); rank r
//! owns the contiguous r-th chunk. Each step reduce-scatters (Avg) the local gradients so
//! rank r receives only its chunk's averaged gradient, steps AdamW on its f32 master chunk
//! (moments for that chunk only), and all-gathers the chunks back into every rank's
//! parameters. Reduce-scatter + all-gather move the same bytes as DDP's all-reduce.
//!
//! AdamW is elementwise, so stepping chunks that cut through parameters gives the same
//! update as stepping whole parameters.

use crate::checkpoint;
use crate::error::{Result, Zero1Error};
use candle_core::{DType, Device, Tensor, Var};
use comm::{Communicator, ReduceOp};
use seam::{AdamW, AdamWConfig};
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

pub struct Zero1 {
    comm: Arc<dyn Communicator>,
    params: Vec<Var>,
    /// Elements of all parameters, and that rounded up to a multiple of the world size.
    numel: usize,
    padded: usize,
    /// This rank's chunk of the flat parameters: the f32 master copy AdamW steps.
    master: Var,
    opt: AdamW,
}

fn flatten(ts: &[Tensor], pad: usize, dev: &Device) -> Result<Tensor> {
    let mut parts: Vec<Tensor> = ts
        .iter()
        .map(|t| t.flatten_all()?.to_dtype(DType::F32))
        .collect::<candle_core::Result<_>>()?;
    if pad > 0 {
        parts.push(Tensor::zeros(pad, DType::F32, dev)?);
    }
    Ok(Tensor::cat(&parts, 0)?)
}

impl Zero1 {
    /// Checks that every rank passes the same parameters (count and sizes; fails on every
    /// rank), copies rank 0's values to all ranks, and keeps this rank's chunk as master.
    pub fn new(comm: Arc<dyn Communicator>, params: &[Var], cfg: AdamWConfig) -> Result<Self> {
        let first = params
            .first()
            .ok_or_else(|| Zero1Error::Input("Zero1::new: no parameters".into()))?;
        if let Some(i) = params.iter().position(|p| p.dtype() != DType::F32) {
            return Err(Zero1Error::Input(format!(
                "Zero1::new: parameter {i} is {:?}; master weights must be f32",
                params[i].dtype()
            )));
        }
        let dev = first.device().clone();
        let w = comm.world_size();
        let numel: usize = params.iter().map(|p| p.elem_count()).sum();
        let mine = [params.len() as f64, numel as f64];
        let all = Tensor::zeros(2 * w, DType::F64, &dev)?;
        comm.all_gather(&Tensor::new(&mine[..], &dev)?, &all)?;
        let all: Vec<f64> = all.to_device(&Device::Cpu)?.to_vec1()?;
        for r in 1..w {
            if all[2 * r..2 * r + 2] != all[..2] {
                return Err(Zero1Error::Mismatch(format!(
                    "rank {r} has {} parameters of {} elements, rank 0 {} of {} (seen on rank {})",
                    all[2 * r],
                    all[2 * r + 1],
                    all[0],
                    all[1],
                    comm.rank()
                )));
            }
        }
        // Same counts are not enough: the same parameters in the same order.
        let shapes: Vec<Vec<usize>> = params.iter().map(|p| p.dims().to_vec()).collect();
        ddp::consistency::check_params_match(comm.as_ref(), &dev, "Zero1", None, &shapes)?;
        for p in params {
            comm.broadcast(p.as_tensor(), 0)?;
        }
        let padded = numel.div_ceil(w) * w;
        let chunk = padded / w;
        let flat = flatten(
            &params
                .iter()
                .map(|p| p.as_tensor().clone())
                .collect::<Vec<_>>(),
            padded - numel,
            &dev,
        )?;
        let master = Var::from_tensor(&flat.narrow(0, comm.rank() * chunk, chunk)?)?;
        Ok(Self {
            comm,
            params: params.to_vec(),
            numel,
            padded,
            master,
            opt: AdamW::new(cfg)?,
        })
    }

    /// Writes a sharded checkpoint into `dir`: this rank's moments chunk, and (rank 0) the
    /// parameters, tied by a manifest ([`checkpoint::save`]). Every rank must call it;
    /// returns once all ranks have written and the manifest is durable.
    pub fn save(&self, dir: &Path) -> Result<()> {
        let r = self.comm.rank();
        let n = self.master.elem_count();
        checkpoint::save(
            self.comm.as_ref(),
            dir,
            &self.params,
            self.opt.steps_taken(),
            || {
                let (m, v) = self
                    .opt
                    .moments(0, &self.master)?
                    .unwrap_or_else(|| (vec![0.0; n], vec![0.0; n]));
                // This rank's chunk, padding included (dropped when read).
                Ok(checkpoint::Moments::from_vecs(vec![(r * n, n)], m, v)?)
            },
        )
    }

    /// Loads a checkpoint written by [`Zero1::save`] on any world size (or consolidated):
    /// parameters into `params`, this rank's chunk of the moments, the step count. Every
    /// file is validated before the model is touched; a failure on any rank fails all.
    pub fn resume(
        comm: Arc<dyn Communicator>,
        params: &[Var],
        cfg: AdamWConfig,
        dir: &Path,
    ) -> Result<Self> {
        // This rank's chunk of the flat elements, as `new` will cut it (the padding has no
        // moments): the only moments it reads.
        let (w, r) = (comm.world_size(), comm.rank());
        let numel: usize = params.iter().map(|p| p.elem_count()).sum();
        let chunk = numel.div_ceil(w);
        let mine = (r * chunk).min(numel)..((r + 1) * chunk).min(numel);
        let want = [(mine.start, mine.len())];
        let read = checkpoint::read_all(dir, params, &want).map_err(Zero1Error::from);
        let dev = params
            .first()
            .ok_or_else(|| Zero1Error::Input("Zero1::resume: no parameters".into()))?
            .device()
            .clone();
        let (loaded, state) = agree_on(comm.as_ref(), &dev, "resume", read)?;
        let set = loaded.set(params).map_err(Zero1Error::from);
        agree_on(comm.as_ref(), &dev, "resume", set)?;
        let mut z = Self::new(comm, params, cfg)?;
        let (mut m, mut v) = state.moments(mine.start, mine.len())?;
        m.resize(z.master.elem_count(), 0.0);
        v.resize(z.master.elem_count(), 0.0);
        let master = z.master.clone();
        z.opt.restore(state.step, 0, &master, &m, &v)?;
        Ok(z)
    }

    /// The flat elements this rank owns (the padding, if any, sits in the last chunk).
    pub fn shard_range(&self) -> Range<usize> {
        let chunk = self.padded / self.comm.world_size();
        let start = self.comm.rank() * chunk;
        start..(start + chunk).min(self.numel.max(start))
    }

    /// Elements of optimizer state this rank keeps moments for.
    pub fn state_elements(&self) -> usize {
        self.master.elem_count()
    }

    /// One step from this rank's *local* gradients (not yet averaged), in the parameters'
    /// order; every parameter needs one. Ends with identical parameters on every rank.
    pub fn step(&mut self, grads: &[Option<Tensor>]) -> Result<()> {
        if grads.len() != self.params.len() {
            return Err(Zero1Error::Input(format!(
                "Zero1::step: {} gradients for {} parameters",
                grads.len(),
                self.params.len()
            )));
        }
        let gs = grads
            .iter()
            .enumerate()
            .map(|(i, g)| {
                g.clone().ok_or_else(|| {
                    Zero1Error::Input(format!("Zero1::step: parameter {i} has no gradient"))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let dev = self.master.device().clone();
        let w = self.comm.world_size();
        let flat = flatten(&gs, self.padded - self.numel, &dev)?;
        drop(gs);
        let g_shard = Tensor::zeros(self.padded / w, DType::F32, &dev)?;
        self.comm.reduce_scatter(&flat, &g_shard, ReduceOp::Avg)?;
        drop(flat);
        self.opt
            .step(std::slice::from_ref(&self.master), &[Some(g_shard)])?;
        let all = Tensor::zeros(self.padded, DType::F32, &dev)?;
        self.comm.all_gather(self.master.as_tensor(), &all)?;
        let mut off = 0;
        for p in &self.params {
            let n = p.elem_count();
            p.set(&all.narrow(0, off, n)?.reshape(p.shape())?)?;
            off += n;
        }
        Ok(())
    }
}

/// Every rank learns whether any rank failed; the failing rank returns its own error,
/// the others one naming it (so no rank waits for a peer that gave up).
pub(crate) fn agree_on<T>(
    comm: &dyn Communicator,
    dev: &Device,
    what: &str,
    r: Result<T>,
) -> Result<T> {
    let w = comm.world_size();
    let flag = Tensor::new(&[if r.is_err() { 1f64 } else { 0.0 }], dev)?;
    let all = Tensor::zeros(w, DType::F64, dev)?;
    comm.all_gather(&flag, &all)?;
    let all: Vec<f64> = all.to_device(&Device::Cpu)?.to_vec1()?;
    match (r, all.iter().position(|&f| f != 0.0)) {
        (Err(e), _) => Err(e),
        (Ok(_), Some(bad)) => Err(Zero1Error::Mismatch(format!(
            "{what} failed on rank {bad} (seen on rank {})",
            comm.rank()
        ))),
        (Ok(v), None) => Ok(v),
    }
}

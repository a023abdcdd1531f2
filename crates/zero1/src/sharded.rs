//! [`ShardedOptimizer`]: optimizer-state sharding (the seeds' interface). Each parameter
//! is owned by one rank ([`crate::partition`]); a rank keeps AdamW moments for the
//! parameters it owns only and steps them; then every owner broadcasts its updated
//! parameters (one flat buffer per owner and group) so all ranks hold the same weights.
//! Gradients must already be averaged across ranks (e.g. by the ddp crate).

use crate::error::{Result, Zero1Error};
use crate::partition;
use candle_core::{DType, Device, Tensor, TensorId, Var};
use comm::Communicator;
use seam::{AdamW, AdamWConfig};
use std::collections::HashMap;
use std::sync::Arc;

/// Parameters that share hyperparameters.
pub struct ParamGroup {
    pub params: Vec<Var>,
    pub cfg: AdamWConfig,
}

pub(crate) struct Group {
    pub(crate) params: Vec<Var>,
    owner: Vec<usize>,
    /// Indices (into `params`) this rank owns, in order: the AdamW's state index.
    pub(crate) mine: Vec<usize>,
    pub(crate) opt: AdamW,
}

pub struct ShardedOptimizer {
    pub(crate) comm: Arc<dyn Communicator>,
    pub(crate) groups: Vec<Group>,
    loads: Vec<usize>,
}

impl ShardedOptimizer {
    /// Partitions `groups` over the ranks of `comm` (fails on every rank if ranks pass
    /// different groups).
    pub fn new(comm: Arc<dyn Communicator>, groups: Vec<ParamGroup>) -> Result<Self> {
        let w = comm.world_size();
        let mut s = Self {
            comm,
            groups: Vec::new(),
            loads: vec![0; w],
        };
        for g in groups {
            s.add_param_group(g)?;
        }
        Ok(s)
    }

    /// Sets every group's learning rate (a schedule's value for the next step).
    pub fn set_lr(&mut self, lr: f64) {
        for g in &mut self.groups {
            g.opt.cfg.lr = lr;
        }
    }

    /// Adds a group during training (e.g. unfrozen layers): its parameters go to the
    /// least-loaded ranks; its moments start at zero and its step count at 0, as in
    /// `torch.optim.Optimizer.add_param_group`.
    pub fn add_param_group(&mut self, g: ParamGroup) -> Result<()> {
        if g.params.is_empty() {
            return Err(Zero1Error::Input(
                "add_param_group: the group has no parameters".into(),
            ));
        }
        for (i, p) in g.params.iter().enumerate() {
            if p.dtype() != DType::F32 {
                return Err(Zero1Error::Input(format!(
                    "add_param_group: parameter {i} is {:?}; master weights must be f32",
                    p.dtype()
                )));
            }
            let id = p.as_tensor().id();
            if self
                .groups
                .iter()
                .flat_map(|g| &g.params)
                .any(|q| q.as_tensor().id() == id)
            {
                return Err(Zero1Error::Input(format!(
                    "add_param_group: parameter {i} is already in a group"
                )));
            }
        }
        self.check_same_everywhere(&g)?;
        let sizes: Vec<usize> = g.params.iter().map(|p| p.elem_count()).collect();
        let owner = partition::assign(&sizes, &mut self.loads);
        let me = self.comm.rank();
        let mine = (0..owner.len()).filter(|&i| owner[i] == me).collect();
        self.groups.push(Group {
            params: g.params,
            owner,
            mine,
            opt: AdamW::new(g.cfg)?,
        });
        Ok(())
    }

    /// Elements of optimizer state-carrying parameters per rank.
    pub fn loads(&self) -> &[usize] {
        &self.loads
    }

    /// Parameters this rank owns (and keeps moments for), over all groups.
    pub fn owned_elements(&self) -> usize {
        self.loads[self.comm.rank()]
    }

    /// One step. `params`/`grads` are the model's parameters and their (averaged)
    /// gradients in any order, looked up by identity; a grouped parameter without a
    /// gradient is skipped, like AdamW. Ends with every rank holding the same weights.
    pub fn step(&mut self, params: &[Var], grads: &[Option<Tensor>]) -> Result<()> {
        if params.len() != grads.len() {
            return Err(Zero1Error::Input(format!(
                "step: {} parameters but {} gradients",
                params.len(),
                grads.len()
            )));
        }
        let by_id: HashMap<TensorId, Option<&Tensor>> = params
            .iter()
            .zip(grads)
            .map(|(p, g)| (p.as_tensor().id(), g.as_ref()))
            .collect();
        let me = self.comm.rank();
        for (gi, g) in self.groups.iter_mut().enumerate() {
            let mut vars = Vec::with_capacity(g.mine.len());
            let mut gs = Vec::with_capacity(g.mine.len());
            for &i in &g.mine {
                let p = &g.params[i];
                let grad = by_id.get(&p.as_tensor().id()).ok_or_else(|| {
                    Zero1Error::Input(format!(
                        "step: parameter {i} of group {gi} is not among the {} parameters passed",
                        params.len()
                    ))
                })?;
                vars.push(p.clone());
                gs.push(grad.cloned());
            }
            // Also with nothing owned: the group's step count stays the same on every rank.
            g.opt.step(&vars, &gs)?;
            for r in 0..self.comm.world_size() {
                share_from(self.comm.as_ref(), g, r, me)?;
            }
        }
        Ok(())
    }

    fn check_same_everywhere(&self, g: &ParamGroup) -> Result<()> {
        let dev = g.params[0].device().clone();
        let mine = [
            self.groups.len() as f64,
            g.params.len() as f64,
            g.params.iter().map(|p| p.elem_count()).sum::<usize>() as f64,
        ];
        let w = self.comm.world_size();
        let out = Tensor::zeros(w * 3, DType::F64, &dev)?;
        self.comm.all_gather(&Tensor::new(&mine[..], &dev)?, &out)?;
        let all: Vec<f64> = out.to_device(&Device::Cpu)?.to_vec1()?;
        for r in 1..w {
            if all[r * 3..r * 3 + 3] != all[..3] {
                return Err(Zero1Error::Mismatch(format!(
                    "rank {r} adds group {} with {} parameters of {} elements, rank 0 group {} with {} of {} (seen on rank {})",
                    all[r * 3], all[r * 3 + 1], all[r * 3 + 2], all[0], all[1], all[2],
                    self.comm.rank()
                )));
            }
        }
        let shapes: Vec<Vec<usize>> = g.params.iter().map(|p| p.dims().to_vec()).collect();
        let what = format!("ShardedOptimizer group {}", self.groups.len());
        ddp::consistency::check_params_match(self.comm.as_ref(), &dev, &what, None, &shapes)?;
        Ok(())
    }
}

/// Rank `r` broadcasts the parameters it owns in group `g` as one flat buffer.
fn share_from(comm: &dyn Communicator, g: &Group, r: usize, me: usize) -> Result<()> {
    let idx: Vec<usize> = (0..g.params.len()).filter(|&i| g.owner[i] == r).collect();
    if idx.is_empty() {
        return Ok(());
    }
    let n: usize = idx.iter().map(|&i| g.params[i].elem_count()).sum();
    let dev = g.params[idx[0]].device();
    let buf = if r == me {
        let parts = idx
            .iter()
            .map(|&i| g.params[i].as_tensor().flatten_all())
            .collect::<candle_core::Result<Vec<_>>>()?;
        Tensor::cat(&parts, 0)?
    } else {
        Tensor::zeros(n, DType::F32, dev)?
    };
    comm.broadcast(&buf, r)?;
    if r != me {
        let mut off = 0;
        for &i in &idx {
            let p = &g.params[i];
            let k = p.elem_count();
            p.set(&buf.narrow(0, off, k)?.reshape(p.shape())?)?;
            off += k;
        }
    }
    Ok(())
}

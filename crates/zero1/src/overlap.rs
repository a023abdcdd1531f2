//! [`Zero1Overlap`]: ZeRO stage 1 through the ddp crate's buckets, so gradient
//! communication overlaps backward. A [`Ddp`] in reduce-scatter mode launches each
//! bucket's reduce-scatter (Avg) from the staged backward as soon as its gradients are
//! final; rank r receives the r-th slice of every (zero-padded) bucket. The rank keeps f32
//! master copies and AdamW moments of exactly those slices, steps them, and all-gathers
//! every bucket back into the parameters. Communication volume equals DDP's all-reduce
//! (reduce-scatter + all-gather); optimizer state is 1/W of DDP's.
//!
//! The step updates the buckets in reverse (the first stages' parameters first) and
//! launches each bucket's all-gather right after its update. With
//! [`Zero1Overlap::set_gather_ahead`] the step returns without collecting them: the next
//! forward makes the compute stream wait for a bucket only right before the first stage
//! that reads it, so the all-gathers overlap that forward (FSDP's forward prefetch, for
//! ZeRO-1). Until then the model's parameters are undefined (stale, or being written by
//! an all-gather straight into a one-parameter bucket's parameter):
//! [`Zero1Overlap::sync_params`] completes them ([`Zero1Overlap::save`] does it itself).
//!
//! ```ignore
//! let mut z = Zero1Overlap::new(comm.clone(), &model, Strategy::Bucketed { bucket_mb: 25.0 }, cfg)?;
//! z.set_gather_ahead(true);
//! let loss = z.forward_backward(&model, &local_batch)?; // reduce-scatters during backward
//! z.step()?;                                           // AdamW on the shard, all-gathers
//! z.sync_params()?;                                    // before reading the parameters
//! ```

use crate::checkpoint;
use crate::error::{Result, Zero1Error};
use crate::gather::Gathers;
use crate::zero::agree_on;
use candle_core::{DType, Tensor, Var};
use comm::Communicator;
use ddp::{Ddp, DdpOptions, Strategy};
use seam::{AdamW, AdamWConfig, Batch, StagedModel};
use std::path::Path;
use std::sync::Arc;

pub struct Zero1Overlap {
    comm: Arc<dyn Communicator>,
    ddp: Ddp,
    params: Vec<Var>,
    /// Per bucket: this rank's slice of the bucket's flat parameters (f32 master).
    masters: Vec<Var>,
    opt: AdamW,
    gathers: Gathers,
    gather_ahead: bool,
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
        let stage_params: Vec<Vec<usize>> = (0..model.num_stages())
            .map(|s| model.stage_params(s))
            .collect();
        let gathers = Gathers::new(
            ddp.buckets().iter().map(|b| b.params.clone()).collect(),
            &stage_params,
        );
        Ok(Self {
            comm,
            ddp,
            params,
            masters,
            opt: AdamW::new(cfg)?,
            gathers,
            gather_ahead: false,
        })
    }

    /// With `true`, [`Self::step`] leaves its all-gathers in flight for the next forward to
    /// wait on stage by stage; the parameters are undefined until then or
    /// [`Self::sync_params`].
    pub fn set_gather_ahead(&mut self, on: bool) {
        self.gather_ahead = on;
    }

    /// Whether [`Self::step`] leaves its all-gathers for the next forward.
    pub fn gather_ahead(&self) -> bool {
        self.gather_ahead
    }

    /// SMs the backward's GEMMs leave to NCCL's reduce-scatters (see
    /// `ddp::DdpOptions::gemm_sm_carveout`; 0: none).
    pub fn set_gemm_sm_carveout(&mut self, carveout: usize) -> Result<()> {
        Ok(self.ddp.set_gemm_sm_carveout(carveout)?)
    }

    /// With `true`, the buckets that become ready at the same stage are reduce-scattered
    /// as one coalesced launch (`ddp::DdpOptions::coalesce`).
    pub fn set_coalesce(&mut self, on: bool) {
        self.ddp.set_coalesce(on);
    }

    /// Completes every all-gather still in flight into the parameters (the compute stream
    /// waits; the host does not block on the GPU).
    pub fn sync_params(&mut self) -> Result<()> {
        Ok(self.gathers.complete(&self.params)?)
    }

    /// Forward and backward on this rank's batch; the buckets' reduce-scatters are
    /// launched during backward. Returns this rank's loss.
    pub fn forward_backward(&mut self, model: &dyn StagedModel, batch: &Batch) -> Result<Tensor> {
        let (gathers, params) = (&mut self.gathers, &self.params);
        let loss = self
            .ddp
            .forward_backward_with(model, batch, |s| gathers.before_stage(s, params))?;
        self.sync_params()?;
        Ok(loss)
    }

    /// Forward and backward without communication: the gradients are summed locally and
    /// reduce-scattered with the next [`Self::forward_backward`] (gradient accumulation).
    pub fn forward_backward_no_sync(
        &mut self,
        model: &dyn StagedModel,
        batch: &Batch,
    ) -> Result<Tensor> {
        self.sync_params()?;
        Ok(self.ddp.forward_backward_no_sync(model, batch)?)
    }

    /// Collects the averaged gradient slices, steps AdamW on them, and all-gathers every
    /// bucket into the parameters (identical on every rank afterwards; with gather-ahead,
    /// once the next forward or [`Self::sync_params`] has collected them).
    pub fn step(&mut self) -> Result<()> {
        let shards = self.reduced_shards()?;
        self.step_on(shards)
    }

    /// [`Self::step`]'s first half: this rank's averaged slice of every bucket (f32, by
    /// bucket; zero in the padding). A caller that clips takes their norm here.
    pub fn reduced_shards(&mut self) -> Result<Vec<Tensor>> {
        self.sync_params()?;
        Ok(self.ddp.finish_reduce_scatter()?)
    }

    /// [`Self::step`]'s second half, on the slices of [`Self::reduced_shards`].
    pub fn step_on(&mut self, shards: Vec<Tensor>) -> Result<()> {
        let shards: Vec<Option<Tensor>> = shards.into_iter().map(Some).collect();
        // Each bucket's all-gather is launched as soon as its AdamW update is queued, so
        // it overlaps the updates after it; the last buckets (the first stages) go first.
        let (comm, masters, gathers) = (&self.comm, &self.masters, &mut self.gathers);
        let (w, params) = (comm.world_size(), &self.params);
        self.opt.step_each_in(
            masters,
            &shards,
            (0..masters.len()).rev(),
            |b| -> Result<()> {
                let m = &masters[b];
                let target = gathers.target(b, m.elem_count() * w, params)?;
                let work = comm.all_gather_async(m.as_tensor(), &target.0)?;
                gathers.launched(b, target, work);
                Ok(())
            },
        )?;
        drop(shards);
        if !self.gather_ahead {
            self.sync_params()?;
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

    /// The AdamW of the master slices (its learning rate, gradient scale and replay
    /// scalars are the caller's to set).
    pub fn optimizer_mut(&mut self) -> &mut AdamW {
        &mut self.opt
    }
    pub fn optimizer(&self) -> &AdamW {
        &self.opt
    }

    /// Where bucket `b`'s slice on this rank sits in the flat (declaration-order)
    /// parameters: (start, len) runs in slice order, and how many slice elements they cover
    /// (the rest is the bucket's zero padding).
    fn slice_runs(&self, b: usize) -> (Vec<(usize, usize)>, usize) {
        let mut offset = vec![0usize; self.params.len() + 1];
        for (i, p) in self.params.iter().enumerate() {
            offset[i + 1] = offset[i] + p.elem_count();
        }
        let chunk = self.masters[b].elem_count();
        let (lo, hi) = (self.comm.rank() * chunk, (self.comm.rank() + 1) * chunk);
        let (mut runs, mut pos, mut covered) = (Vec::new(), 0usize, 0usize);
        for &i in &self.ddp.buckets()[b].params {
            let n = self.params[i].elem_count();
            let (a, z) = (pos.max(lo), (pos + n).min(hi));
            if a < z {
                runs.push((offset[i] + a - pos, z - a));
                covered += z - a;
            }
            pos += n;
        }
        (runs, covered)
    }

    /// Writes a sharded checkpoint into `dir` (the format of [`crate::checkpoint`], with
    /// this rank's runs): every rank must call it; returns once all ranks have written and
    /// the manifest is durable.
    pub fn save(&mut self, dir: &Path) -> Result<()> {
        self.sync_params()?;
        let this = &*self;
        checkpoint::save(
            this.comm.as_ref(),
            dir,
            &this.params,
            this.opt.steps_taken(),
            || {
                let (mut runs, mut m, mut v) = (Vec::new(), Vec::new(), Vec::new());
                for (b, master) in this.masters.iter().enumerate() {
                    let (rb, covered) = this.slice_runs(b);
                    let n = master.elem_count();
                    let (mb, vb) = this
                        .opt
                        .moments(b, master)?
                        .unwrap_or_else(|| (vec![0.0; n], vec![0.0; n]));
                    m.extend_from_slice(&mb[..covered]);
                    v.extend_from_slice(&vb[..covered]);
                    runs.extend(rb);
                }
                Ok((runs, m, v))
            },
        )
    }

    /// Loads a checkpoint of [`Self::save`] or [`crate::Zero1::save`] (any world size and
    /// bucket layout, or consolidated) into `model`'s parameters and a new optimizer with
    /// `strategy`'s buckets. Every file is validated before the model is touched; a
    /// failure on any rank fails all.
    pub fn resume(
        comm: Arc<dyn Communicator>,
        model: &dyn StagedModel,
        strategy: Strategy,
        cfg: AdamWConfig,
        dir: &Path,
    ) -> Result<Self> {
        let params = model.params().vars().to_vec();
        let read = checkpoint::read_all(dir, &params);
        let dev = params
            .first()
            .ok_or_else(|| Zero1Error::Input("Zero1Overlap::resume: no parameters".into()))?
            .device()
            .clone();
        let (loaded, state) = agree_on(comm.as_ref(), &dev, "resume", read)?;
        Self::resume_from(comm, model, strategy, cfg, &loaded, &state)
    }

    /// [`Self::resume`] from state already read and agreed on by every rank: the
    /// parameters (by index) and the flat optimizer state (a replicated optimizer's
    /// checkpoint converts to it: `ddp::checkpoint::read_flat`).
    pub fn resume_from(
        comm: Arc<dyn Communicator>,
        model: &dyn StagedModel,
        strategy: Strategy,
        cfg: AdamWConfig,
        loaded: &[Tensor],
        state: &checkpoint::Consolidated,
    ) -> Result<Self> {
        let params = model.params().vars().to_vec();
        checkpoint::set_params(&params, loaded)?;
        let mut z = Self::new(comm, model, strategy, cfg)?;
        for b in 0..z.masters.len() {
            let (runs, _) = z.slice_runs(b);
            let n = z.masters[b].elem_count();
            let (mut m, mut v) = (Vec::with_capacity(n), Vec::with_capacity(n));
            for (start, len) in runs {
                m.extend_from_slice(&state.exp_avg[start..start + len]);
                v.extend_from_slice(&state.exp_avg_sq[start..start + len]);
            }
            m.resize(n, 0.0);
            v.resize(n, 0.0);
            let master = z.masters[b].clone();
            z.opt.restore(state.step, b, &master, &m, &v)?;
        }
        Ok(z)
    }
}

//! [`Zero1Overlap`]: ZeRO stage 1 through the ddp crate's buckets, so gradient
//! communication overlaps backward. A [`Ddp`] in reduce-scatter mode launches each
//! bucket's reduce-scatter (Avg) from the staged backward as soon as its gradients are
//! final. Communication volume equals DDP's all-reduce (reduce-scatter + all-gather);
//! optimizer state is 1/W of DDP's.
//!
//! Two kinds of shard, as [`Ddp::shards_in_place`] decides per parameter:
//! - a large parameter (64 Ki elements or more, a multiple of W) is sharded where it lies,
//!   as FSDP2 shards per parameter: its gradient is reduce-scattered in place, rank r
//!   steps elements [r·n/W, (r+1)·n/W) of the parameter itself ([`seam::Span`]; no master
//!   copy) and all-gathers them in place. Nothing is copied; on one rank the collectives
//!   are no-ops and AdamW writes the bf16 weight copies as on one GPU.
//! - the others are copied into the bucket's flat buffer (zero-padded to a multiple of
//!   W); rank r keeps an f32 master of the r-th slice, steps it and all-gathers it into a
//!   flat buffer, copied back into the parameters.
//!
//! The step updates the buckets in reverse (the first stages' parameters first) and
//! launches each bucket's all-gather right after its update. With
//! [`Zero1Overlap::set_gather_ahead`] it queues them instead: the next forward launches
//! them all at its start and makes the compute stream wait for a bucket only right before
//! the first stage that reads it, so the all-gathers overlap that forward
//! (Megatron-Core's overlap_param_gather; in one CUDA graph per step, the only place they
//! can overlap it). Until then the model's parameters are stale:
//! [`Zero1Overlap::sync_params`] completes them ([`Zero1Overlap::save`] does it itself).
//!
//! ```ignore
//! let mut z = Zero1Overlap::new(comm.clone(), &model, Strategy::Bucketed { bucket_mb: 25.0 }, cfg)?;
//! z.set_gather_ahead(true);
//! let loss = z.forward_backward(&model, &local_batch)?; // reduce-scatters during backward
//! z.step()?;                                           // AdamW on the shard, all-gathers
//! z.sync_params()?;                                    // before reading the parameters
//! ```

use crate::error::{Result, Zero1Error};
use crate::gather::{beside_adamw, bucket_flat, Gathers, OpenBucket};
use candle_core::{DType, Tensor, Var};
use comm::Communicator;
use ddp::{BucketShard, Ddp, DdpOptions};
use seam::shadow::Bf16Shadows;
use seam::{AdamW, AdamWConfig, Batch, Span, StagedModel};
use std::sync::Arc;

pub struct Zero1Overlap {
    pub(crate) comm: Arc<dyn Communicator>,
    pub(crate) ddp: Ddp,
    pub(crate) params: Vec<Var>,
    /// What this rank's AdamW steps (state k is span k), bucket by bucket: the f32 master
    /// of its slice of the bucket's flat part, then its chunk of each parameter sharded in
    /// place.
    pub(crate) spans: Vec<Span>,
    /// Per span: its bucket, and the parameter it is a chunk of (`None`: a flat master).
    pub(crate) owner: Vec<(usize, Option<usize>)>,
    pub(crate) opt: AdamW,
    pub(crate) gathers: Gathers,
    pub(crate) gather_ahead: bool,
    /// With gather-ahead, the first buckets gathered beside AdamW, the rest at the next
    /// forward (⌈buckets ÷ world⌉ unless `ZERO1_PARAM_GATHER` says: gather::beside_adamw).
    gather_beside_adamw: usize,
    /// All-gather the bf16 copies of the parameters sharded in place, not their f32
    /// masters, where the model reads them only through the copies (on by default;
    /// `ZERO1_GATHER=f32` turns it off).
    pub(crate) bf16_gather: bool,
    /// Spans whose copies a step gathers instead of their masters, and whether a step
    /// (eager, or a graph replay: [`Self::replayed`]) has left those masters stale since
    /// [`Self::sync_params`] last gathered them.
    pub(crate) copy_gathered: Vec<usize>,
    pub(crate) masters_stale: bool,
    /// Each parameter's shape (its `Var` may be released: crate::masters).
    pub(crate) shapes: Vec<candle_core::Shape>,
    /// Per forward stage, the parameters it uses; FSDP's stage buffers (crate::fsdp), and
    /// whether releasing the masters shards the copies too.
    pub(crate) stage_params: Vec<Vec<usize>>,
    pub(crate) units: Option<std::sync::Arc<crate::fsdp::Units>>,
    /// FSDP: (the last stages kept gathered from the forward, stages gathered ahead)
    /// (`set_fsdp_gathers`).
    pub(crate) fsdp_gathers: (usize, usize),
    /// FSDP: stages gathered as one unit (`set_fsdp_unit`; `None`: memplan::fsdp_unit).
    pub(crate) fsdp_unit: Option<usize>,
    pub(crate) fsdp: bool,
}

impl Zero1Overlap {
    /// Builds the reduce-scattering Ddp of `opts` (a `Strategy`, or `DdpOptions` for the
    /// wire dtype, coalescing, …; it checks that every rank has the same model and
    /// broadcasts rank 0's parameters), then this rank's shards; ZeRO-2 (the same step,
    /// each bucket's gradients freed once scattered) with `DdpOptions::release_gradients`.
    pub fn new(
        comm: Arc<dyn Communicator>,
        model: &dyn StagedModel,
        opts: impl Into<DdpOptions>,
        cfg: AdamWConfig,
    ) -> Result<Self> {
        let params = model.params().vars().to_vec();
        if let Some(i) = (0..params.len()).find(|&i| model.params().is_released(i)) {
            return Err(Zero1Error::Input(format!(
                "Zero1Overlap: parameter {i}'s f32 master is released; build (or resume) before releasing"
            )));
        }
        if let Some(i) = params.iter().position(|p| p.dtype() != DType::F32) {
            return Err(Zero1Error::Input(format!(
                "Zero1Overlap: parameter {i} is {:?}; master weights must be f32",
                params[i].dtype()
            )));
        }
        let opts: DdpOptions = opts.into();
        let opts = DdpOptions {
            reduce_scatter: true,
            ..opts
        };
        let ddp = Ddp::new(comm.clone(), model, opts)?;
        let (w, r) = (comm.world_size(), comm.rank());
        let (mut spans, mut owner, mut flat_params) = (Vec::new(), Vec::new(), Vec::new());
        for (b, bucket) in ddp.buckets().iter().enumerate() {
            let (sharded, flat): (Vec<usize>, Vec<usize>) =
                bucket.params.iter().partition(|&&i| ddp.shards_in_place(i));
            if !flat.is_empty() {
                let f = bucket_flat(&params, &flat, w)?;
                let chunk = f.elem_count() / w;
                let master = Var::from_tensor(&f.narrow(0, r * chunk, chunk)?)?;
                spans.push(Span::whole(&master));
                owner.push((b, None));
            }
            for i in sharded {
                let n = params[i].elem_count() / w;
                spans.push(Span {
                    var: params[i].clone(),
                    start: r * n,
                    len: n,
                    copy_at: None,
                });
                owner.push((b, Some(i)));
            }
            flat_params.push(flat);
        }
        let stage_params: Vec<Vec<usize>> = (0..model.num_stages())
            .map(|s| model.stage_params(s))
            .collect();
        let bucket_params: Vec<Vec<usize>> =
            ddp.buckets().iter().map(|b| b.params.clone()).collect();
        let gather_beside_adamw = beside_adamw(
            std::env::var("ZERO1_PARAM_GATHER").ok(),
            bucket_params.len(),
            comm.world_size(),
        )?;
        let gathers = Gathers::new(&bucket_params, flat_params, &stage_params);
        let stage_params = stage_params.clone();
        Ok(Self {
            comm,
            ddp,
            spans,
            owner,
            opt: AdamW::new(cfg)?,
            gathers,
            gather_ahead: false,
            gather_beside_adamw,
            bf16_gather: std::env::var("ZERO1_GATHER").as_deref() != Ok("f32"),
            copy_gathered: Vec::new(),
            masters_stale: false,
            shapes: params.iter().map(|p| p.shape().clone()).collect(),
            params,
            stage_params,
            units: None,
            fsdp_gathers: (0, 1),
            fsdp_unit: None,
            fsdp: false,
        })
    }

    /// Launches the all-gathers a step left for the next forward and completes every one
    /// in flight: what a forward reads (the bf16 copies, or the masters) is then whole;
    /// masters whose copies were gathered stay stale.
    pub fn complete_gathers(&mut self) -> Result<()> {
        self.gathers.launch_queued(self.comm.as_ref(), false)?;
        self.collect_launched()
    }

    /// Completes the all-gathers launched, leaving those queued for the next forward (the
    /// end of a captured step: its gathers are the next replay's first work).
    pub fn collect_launched(&mut self) -> Result<()> {
        Ok(self.gathers.complete(&self.params)?)
    }

    /// Forward and backward on this rank's batch; the buckets' reduce-scatters are
    /// launched during backward. Returns this rank's loss.
    pub fn forward_backward(&mut self, model: &dyn StagedModel, batch: &Batch) -> Result<Tensor> {
        Ok(self
            .forward_backward_observed(model, batch, |_, _| Ok(()))?
            .0)
    }

    /// [`Self::forward_backward`] with `observe(s, grads)` in stage `s`'s backward where the
    /// gradients there are already this rank's reduced ones (`Ddp::forward_backward_observed`:
    /// one rank, one micro-batch); returns whether it saw every stage's.
    pub fn forward_backward_observed(
        &mut self,
        model: &dyn StagedModel,
        batch: &Batch,
        observe: impl FnMut(usize, &seam::Grads) -> ddp::error::Result<()>,
    ) -> Result<(Tensor, bool)> {
        self.beside_gathers(|ddp, before| {
            ddp.forward_backward_observed(model, batch, before, observe)
        })
    }

    /// Forward and backward without communication of gradients: they are summed locally
    /// and reduce-scattered with the next [`Self::forward_backward`] (gradient
    /// accumulation). The first micro-batch of a step is one of these: the last step's
    /// gathers start beside its forward, which waits for each bucket right before the first
    /// stage that reads it, as [`Self::forward_backward_observed`] does (waiting for them
    /// all first left the whole all-gather in front of the forward).
    pub fn forward_backward_no_sync(
        &mut self,
        model: &dyn StagedModel,
        batch: &Batch,
    ) -> Result<Tensor> {
        self.beside_gathers(|ddp, before| ddp.forward_backward_no_sync_with(model, batch, before))
    }

    /// Runs `pass` (one of the Ddp's forward-backwards) with `before(s)` before forward
    /// stage `s`: the last step's gathers start now, beside this forward, which waits for
    /// each bucket right before the first stage that reads it (and FSDP's gathers its
    /// stage's); whatever is still in flight after is completed.
    fn beside_gathers<T>(
        &mut self,
        pass: impl FnOnce(&mut Ddp, &mut dyn FnMut(usize) -> ddp::Result<()>) -> ddp::Result<T>,
    ) -> Result<T> {
        self.gathers.launch_queued(self.comm.as_ref(), false)?;
        let mut fsdp = self.gather_stage();
        let (gathers, params) = (&mut self.gathers, &self.params);
        let mut before = |s: usize| -> ddp::Result<()> {
            fsdp(s)?;
            gathers.before_stage(s, params)
        };
        let out = pass(&mut self.ddp, &mut before)?;
        self.complete_gathers()?;
        Ok(out)
    }

    /// Collects the averaged gradient slices, steps AdamW on them, and all-gathers every
    /// bucket into the parameters (identical on every rank afterwards; with gather-ahead,
    /// once the next forward or [`Self::sync_params`] has collected them).
    pub fn step(&mut self) -> Result<()> {
        let shards = self.reduced_shards()?;
        self.step_on(shards, None)
    }

    /// [`Self::step`]'s first half: this rank's averaged part of every bucket (zero in the
    /// flat part's padding). A caller that clips takes their norm here.
    pub fn reduced_shards(&mut self) -> Result<Vec<BucketShard>> {
        self.complete_gathers()?;
        Ok(self.ddp.finish_reduce_scatter()?)
    }

    /// Every gradient of `shards` (for a norm): the flat parts' slices, then the chunks of
    /// the parameters sharded in place in parameter order. On one rank, where every
    /// parameter is its own shard, that is the gradients in the order one process holds
    /// them, so a norm over them has the bits of one process's.
    pub fn shard_grads(shards: &[BucketShard]) -> Vec<Option<Tensor>> {
        let mut chunks: Vec<&(usize, Tensor)> = shards.iter().flat_map(|s| &s.params).collect();
        chunks.sort_by_key(|(i, _)| *i);
        let flat = shards.iter().flat_map(|s| s.flat.iter().cloned());
        flat.chain(chunks.into_iter().map(|(_, g)| g.clone()))
            .map(Some)
            .collect()
    }

    /// [`Self::step`]'s second half, on the parts of [`Self::reduced_shards`]. `shadows`:
    /// the model's bf16 weight copies (`model.params().bf16_shadows()`), written for every
    /// parameter this rank updates whole (all of the large ones on one rank).
    pub fn step_on(
        &mut self,
        mut shards: Vec<BucketShard>,
        shadows: Option<&Bf16Shadows>,
    ) -> Result<()> {
        let mut grads: Vec<Option<Tensor>> = Vec::with_capacity(self.spans.len());
        for &(b, who) in &self.owner {
            let s = shards
                .get_mut(b)
                .ok_or_else(|| Zero1Error::Input(format!("no reduced part of bucket {b}")))?;
            grads.push(match who {
                None => s.flat.take(),
                Some(i) => s
                    .params
                    .iter()
                    .find(|(j, _)| *j == i)
                    .map(|(_, g)| g.clone()),
            });
        }
        // Each bucket's all-gathers are one group, queued as soon as its AdamW updates are;
        // launched at once, so they overlap the updates after them, or with gather-ahead at
        // the next forward (Gathers::queue). The last buckets (the first stages) go first.
        let (comm, spans, owner, gathers) =
            (&self.comm, &self.spans, &self.owner, &mut self.gathers);
        let (w, params) = (comm.world_size(), &self.params);
        // FSDP's spans (every detached master once the copies are sharded): no copy to
        // write, crate::fsdp gathers from the masters.
        let sharded = self.units.is_some();
        let from_master = |k: usize| sharded && owner[k].1.is_some() && spans[k].copy_at.is_some();
        let index: Vec<Option<usize>> = (0..owner.len())
            .map(|k| owner[k].1.filter(|_| !from_master(k)))
            .collect();
        // The parts whose bf16 copies AdamW writes (seam::Span) and this step gathers.
        let copies = shadows.filter(|s| self.bf16_gather && w > 1 && s.enabled());
        let gathered = &mut self.copy_gathered;
        let mut any = false;
        // The bucket being updated: its (input, output) pairs, and its flat part's target.
        let mut open: Option<OpenBucket> = None;
        let (ahead, beside) = (self.gather_ahead, self.gather_beside_adamw);
        let mut closed = 0;
        gathers.begin_step();
        let mut launch = |open: &mut Option<OpenBucket>, gathers: &mut Gathers| -> Result<()> {
            if let Some(o) = open.take() {
                gathers.queue(o, comm.as_ref(), !ahead || closed < beside)?;
                closed += 1;
            }
            Ok(())
        };
        // A bucket's spans in few launches, its gather queued after them.
        self.opt.step_spans_together(
            spans,
            &grads,
            (0..spans.len()).rev(),
            |k, j| owner[k].0 == owner[j].0,
            |k| -> Result<()> {
                let (b, who) = owner[k];
                if open.as_ref().is_some_and(|o| o.0 != b) {
                    launch(&mut open, gathers)?;
                }
                let (_, pairs, target) = open.get_or_insert_with(|| (b, Vec::new(), None));
                // On the CPU only a detached master's AdamW writes its copy (crate::masters).
                let on_copy = spans[k].copy_at.is_some() || spans[k].var.device().is_cuda();
                let copy = who.zip(copies).filter(|(i, s)| s.gatherable(*i) && on_copy);
                if let (Some((i, sh)), true) = (copy, from_master(k)) {
                    sh.hold(i); // FSDP: gathered stage by stage before each use
                } else if let Some((i, sh)) = copy {
                    let c = sh.copy(i).ok_or_else(|| {
                        Zero1Error::Input(format!("parameter {i}: AdamW wrote no bf16 copy"))
                    })?;
                    let whole = c.flatten_all()?;
                    pairs.push((whole.narrow(0, spans[k].at(), spans[k].len)?, whole));
                    sh.hold(i);
                    any = true;
                    if !gathered.contains(&k) {
                        gathered.push(k);
                    }
                } else if spans[k].copy_at.is_some() {
                    return Err(Zero1Error::Input(format!(
                        "span {k}: a released master's step needs the model's bf16 copies"
                    )));
                } else if who.is_some() {
                    let whole = spans[k].var.as_tensor().flatten_all()?;
                    pairs.push((spans[k].view()?, whole));
                } else {
                    let m = spans[k].var.as_tensor();
                    let t = gathers.target(b, m.elem_count() * w, params)?;
                    pairs.push((m.clone(), t.0.clone()));
                    *target = Some(t);
                }
                // A bucket's spans are consecutive: the last of its (in this order) closes it.
                if k == 0 || owner[k - 1].0 != b {
                    launch(&mut open, gathers)?;
                }
                Ok(())
            },
            shadows.map(|s| (s, &index[..])),
        )?;
        launch(&mut open, gathers)?;
        drop((grads, shards));
        self.masters_stale |= any;
        if !self.gather_ahead {
            self.sync_params()?;
        }
        Ok(())
    }

    /// Elements of optimizer state this rank keeps (per element: two moments, plus an
    /// f32 master for the flat parts' slices).
    pub fn state_elements(&self) -> usize {
        self.spans.iter().map(|s| s.len).sum()
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
}

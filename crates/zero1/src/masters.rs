//! The f32 masters of [`Zero1Overlap`]: when they are stale and made whole again
//! ([`Zero1Overlap::sync_params`]), and sharded masters.
//!
//! Sharded f32 masters (train's default for zero1 and zero2 above one rank on GPUs): the ZeRO paper's ZeRO-1 and
//! ZeRO-2, where a rank keeps the f32
//! master of its part of each parameter only, not the whole of every one (12Ψ/N bytes of
//! optimizer state with the masters, not 4Ψ + 8Ψ/N).
//!
//! [`Zero1Overlap::release_masters`] detaches, for each parameter sharded in place whose
//! forward reads only its bf16 copy (the copies being what the step all-gathers), this
//! rank's chunk of the f32 master into a `Var` of its own (`seam::Span::copy_at`): AdamW
//! steps that chunk and writes its bf16 copy into the parameter's copy, which the step
//! all-gathers as before; the model's whole master is released
//! (`seam::ParamSet::release_uncopied`) right after its chunk is made, which frees it. Once
//! no whole master is left, the copies are made: views into one gather buffer
//! (`comm::Communicator::gather_buffer`), all-gathered from the ranks' chunks, cast to bf16
//! (the bits the whole master's cast gives); FSDP's, views into its unit buffers. So no
//! whole bf16 copy ever sits beside the whole masters. The arithmetic is the same, element
//! by element: a replay computes the bits it computed before.
//!
//! What reads a whole f32 master afterwards gathers it: a checkpoint
//! ([`Zero1Overlap::whole_params`], one parameter at a time, to the host on rank 0).
//! Resuming builds a new optimizer from whole masters, so it comes before the release.
//!
//! ```ignore
//! let mut z = Zero1Overlap::new(comm, &model, opts, cfg)?;   // masters whole
//! let n = z.release_masters(model.params_mut())?;            // the whole masters freed
//! ```

use crate::error::{Result, Zero1Error};
use crate::overlap::Zero1Overlap;
use candle_core::{DType, Device, Tensor, Var};
use seam::ParamSet;

impl Zero1Overlap {
    /// Detaches this rank's chunk of every master it may (see the module's doc) and
    /// releases the whole one from `params` (`seam::ParamSet::release_uncopied`), one at a
    /// time, so that the whole masters never exist beside all the chunks; returns how many:
    /// none on one rank, without bf16 copies (a bf16 model on CUDA; on the CPU where enabled
    /// by hand, for tests), or with the f32 gather (`set_bf16_gather(false)`). The copies
    /// are made after (see below), whole and held, so that the next forward reads them (not
    /// with FSDP, which shards its copies and gathers them before each use: `shard_copies`).
    pub fn release_masters(&mut self, params: &mut ParamSet) -> Result<usize> {
        let w = self.comm.world_size();
        if w == 1 || !self.bf16_gather || !params.bf16_shadows().enabled() {
            return Ok(0);
        }
        self.sync_params()?;
        let releasable = |k: usize| {
            let i = self.owner[k].1?;
            let ok = self.spans[k].copy_at.is_none() && params.bf16_shadows().gatherable(i);
            ok.then_some(i)
        };
        let mine: Vec<(usize, usize)> = (0..self.spans.len())
            .filter_map(|k| releasable(k).map(|i| (k, i)))
            .collect();
        let mut released = 0;
        for &(k, i) in &mine {
            let span = self.spans[k].clone();
            let master = span.var.as_tensor();
            let chunk = Var::from_tensor(&span.view()?)?;
            let at = span.start;
            self.spans[k] = seam::Span {
                var: chunk,
                start: 0,
                len: span.len,
                copy_at: Some(at),
            };
            self.params[i] = Var::zeros(1, DType::F32, master.device())?;
            // Its copy comes below, once no whole master is left beside it.
            params.release_uncopied(i)?;
            released += 1;
        }
        // The copies, made once the whole masters are gone (no whole bf16 copy ever sits
        // beside them): FSDP's views into its unit buffers, gathered before each use;
        // the others' views into one gather buffer (NCCL: a window, whose gathers take
        // fewer SMs), gathered now from the ranks' chunks, the bits the whole master's
        // cast gives.
        match self.fsdp {
            true => self.shard_copies(params.bf16_shadows(), &mine)?,
            false => self.copies_in_gather_buffer(params, &mine)?,
        }
        Ok(released)
    }

    /// Makes the copies of parameters `mine` ((span, parameter) pairs, released) views into
    /// one `Communicator::gather_buffer`, in that order (the same on every rank), and
    /// gathers them from the ranks' f32 chunks, cast to bf16 (the copies are then held).
    fn copies_in_gather_buffer(&self, params: &ParamSet, mine: &[(usize, usize)]) -> Result<()> {
        let Some(&(k0, _)) = mine.first() else {
            return Ok(());
        };
        let dev = self.spans[k0].var.device().clone();
        let len = mine.iter().map(|&(_, i)| self.shapes[i].elem_count()).sum();
        // NCCL's gathers, not comm's copy-engine ones: at world 2 its zero-CTA copies, 4 of
        // 10 buckets beside AdamW, took 0.93x one GPU (comm::nccl::NCCL_CE_WORLDS).
        let buf = self
            .comm
            .gather_buffer_by(len, DType::BF16, &dev, comm::Gatherer::Nccl)?;
        let pairs = self
            .copies_into(params.bf16_shadows(), &buf, mine)?
            .into_iter()
            .map(|(k, view)| Ok((self.spans[k].var.as_tensor().flatten_all()?, view)))
            .collect::<Result<Vec<_>>>()?;
        self.comm.all_gather_cast_coalesced_async(&pairs)?.wait()?;
        Ok(())
    }

    /// Makes the copies of parameters `mine` ((span, parameter) pairs) consecutive views
    /// into `buf` from its start, in that order (the model reads them in their shapes);
    /// returns (span, flat view) of each, for the gathers that fill them.
    pub(crate) fn copies_into(
        &self,
        shadows: &seam::shadow::Bf16Shadows,
        buf: &Tensor,
        mine: &[(usize, usize)],
    ) -> Result<Vec<(usize, Tensor)>> {
        let mut off = 0;
        mine.iter()
            .map(|&(k, i)| {
                let n = self.shapes[i].elem_count();
                let view = buf.narrow(0, off, n)?;
                shadows.set_copy(i, view.reshape(self.shapes[i].clone())?);
                off += n;
                Ok((k, view))
            })
            .collect()
    }

    /// Every parameter's f32 value, for a checkpoint: the masters held whole as they are;
    /// each released one all-gathered from the ranks' chunks, one at a time (every rank
    /// takes part), copied to the host on rank 0 and a broadcast placeholder of its shape
    /// elsewhere (only rank 0 writes the parameters).
    pub(crate) fn whole_params(&self) -> Result<Vec<Tensor>> {
        let rank0 = self.comm.rank() == 0;
        let mut out: Vec<Tensor> = self.params.iter().map(|v| v.as_tensor().clone()).collect();
        for (k, span) in self.spans.iter().enumerate() {
            let (Some(i), Some(_)) = (self.owner[k].1, span.copy_at) else {
                continue;
            };
            let shape = self.shapes[i].clone();
            let dev = span.var.device();
            let full = Tensor::zeros(shape.elem_count(), DType::F32, dev)?;
            let pair = [(span.var.as_tensor().flatten_all()?, full.clone())];
            self.comm.all_gather_coalesced_async(&pair)?.wait()?;
            out[i] = match rank0 {
                true => full.reshape(shape)?.to_device(&Device::Cpu)?,
                false => Tensor::zeros((), DType::F32, &Device::Cpu)?.broadcast_as(shape)?,
            };
        }
        if out.is_empty() {
            return Err(Zero1Error::Input("no parameters".into()));
        }
        Ok(out)
    }

    /// Completes every all-gather still in flight into the parameters (the compute stream
    /// waits; the host does not block on the GPU) and makes every f32 master whole (where
    /// a step gathered bf16 copies instead: the f32 parts all-gathered as one group, for a
    /// checkpoint, an export or a forward that reads masters).
    pub fn sync_params(&mut self) -> Result<()> {
        // The queue stays due: a step captured next holds its launches (gather.rs).
        self.gathers.launch_queued(self.comm.as_ref(), true)?;
        self.collect_launched()?;
        if std::mem::take(&mut self.masters_stale) {
            // A detached master (crate::masters) is this rank's part alone: nothing to gather.
            let pairs = self
                .copy_gathered
                .iter()
                .filter(|&&k| self.spans[k].copy_at.is_none())
                .map(|&k| {
                    Ok((
                        self.spans[k].view()?,
                        self.spans[k].var.as_tensor().flatten_all()?,
                    ))
                })
                .collect::<Result<Vec<_>>>()?;
            if !pairs.is_empty() {
                self.comm.all_gather_coalesced_async(&pairs)?.wait()?;
            }
        }
        Ok(())
    }

    /// A captured step was replayed (its host code, which marks the masters stale, did not
    /// run): the masters of the parts gathered as copies are stale until
    /// [`Self::sync_params`].
    pub fn replayed(&mut self) {
        self.masters_stale |= !self.copy_gathered.is_empty();
        self.gathers.requeue();
    }
}

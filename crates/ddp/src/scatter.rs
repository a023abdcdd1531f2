//! Reduce-scatter mode (ZeRO-1, the zero1 crate): collecting this rank's part of every
//! bucket, and which parameters are sharded where they lie.

use crate::error::{DdpError, Result};
use crate::launch::{scaled, InFlight};
use crate::reducer::{BucketShard, Ddp};
use crate::DdpOptions;
use candle_core::{DType, Tensor};
use comm::Communicator;

impl Ddp {
    /// Reduce-scatter mode: waits for every bucket (the compute stream waits) and returns
    /// this rank's averaged part of each, by bucket index: the slice of its flat buffer
    /// (f32; a flat part of n elements, padded to n' = a multiple of the world size W,
    /// gives slice [r·n'/W, (r+1)·n'/W)) and, for each parameter sharded in place
    /// ([`Self::shards_in_place`]), its chunk (in the wire dtype, a view of the gradient).
    pub fn finish_reduce_scatter(&mut self) -> Result<Vec<BucketShard>> {
        let idle = self.in_flight.is_empty() && self.early.is_empty() && self.local.is_empty();
        if !self.opts.reduce_scatter || idle {
            return Err(DdpError::Input(
                "finish_reduce_scatter: no reduce-scattering backward in flight".into(),
            ));
        }
        let mut out: Vec<Option<BucketShard>> = (0..self.buckets.len()).map(|_| None).collect();
        let scale = self.scale.take();
        let (mut shards, mut beside) = (std::mem::take(&mut self.early), Vec::new());
        for f in std::mem::take(&mut self.in_flight) {
            beside.extend(self.beside_parts(&f)?);
            shards.extend(self.shards_of(f, scale)?);
        }
        // Stage 0's gradients from rows (ddp::rows), each alone in its bucket: this rank's
        // part of each, as its bucket's reduce-scatter would have left it.
        for (i, g) in std::mem::take(&mut self.local) {
            let b = (self.buckets.iter().position(|k| k.params == [i])).ok_or_else(|| {
                DdpError::Input(format!("parameter {i} has no bucket of its own"))
            })?;
            let s = match self.shards_in_place(i) {
                true => BucketShard {
                    flat: None,
                    params: vec![(i, self.chunk_of(&g)?)],
                },
                false => BucketShard {
                    flat: Some(self.padded_chunk(&g)?),
                    params: Vec::new(),
                },
            };
            beside.extend(
                s.flat
                    .iter()
                    .chain(s.params.iter().map(|(_, t)| t))
                    .cloned(),
            );
            shards.push((b, s));
        }
        self.squares_finish(scale, beside)?;
        for (b, s) in shards {
            out[b] = Some(s);
        }
        out.into_iter()
            .enumerate()
            .map(|(b, s)| s.ok_or_else(|| DdpError::Input(format!("bucket {b} was not launched"))))
            .collect()
    }

    /// One launch's parts, by bucket, once the compute stream waits for it. Released
    /// gradients' chunks were received into buffers of their own (`Prepared::outs`), so
    /// that dropping the launch frees the full gradients.
    pub(crate) fn shards_of(
        &self,
        f: InFlight,
        scale: Option<f64>,
    ) -> Result<Vec<(usize, BucketShard)>> {
        f.work.wait()?;
        f.buckets
            .into_iter()
            .map(|p| {
                let flat = p
                    .shard
                    .map(|s| scaled(s.to_dtype(DType::F32)?, scale))
                    .transpose()?;
                let params = (p.in_place.iter().enumerate())
                    .map(|(k, (i, g))| {
                        let c = p.outs.get(k).cloned();
                        Ok((*i, scaled(c.map_or_else(|| self.chunk_of(g), Ok)?, scale)?))
                    })
                    .collect::<Result<_>>()?;
                Ok((p.bucket, BucketShard { flat, params }))
            })
            .collect()
    }

    /// Launches still in flight, and bucket parts already collected during the backward
    /// (with [`crate::DdpOptions::release_gradients`]), for a test or a trace.
    pub fn pending(&self) -> (usize, usize) {
        (self.in_flight.len(), self.early.len())
    }

    /// Whether reduce-scatter mode shards parameter `i` in place (its gradient's chunk
    /// reduced where it lies, its chunk of the parameter updated and all-gathered in
    /// place): a multiple of the world size, and large enough to go alone
    /// (`goes_alone`). The others go through their bucket's flat buffer.
    pub fn shards_in_place(&self, i: usize) -> bool {
        let n = self.shapes[i].elem_count();
        self.scatters() && self.goes_alone(n) && n.is_multiple_of(self.comm.world_size())
    }

    /// Whether a gradient of `n` elements is reduced where it lies rather than copied into
    /// its bucket's flat buffer: from 64 Ki elements; on one rank always (a flat buffer
    /// batches small messages, and one rank sends none).
    pub(crate) fn goes_alone(&self, n: usize) -> bool {
        n >= crate::launch::IN_PLACE_MIN || self.comm.world_size() == 1
    }

    /// This rank's chunk of `t` flattened and zero-padded to a multiple of the world size,
    /// in f32 (a bucket's flat part of it alone).
    fn padded_chunk(&self, t: &Tensor) -> Result<Tensor> {
        let t = t.flatten_all()?.to_dtype(DType::F32)?;
        let pad = t.elem_count().next_multiple_of(self.comm.world_size()) - t.elem_count();
        let zeros = Tensor::zeros(pad, DType::F32, t.device())?;
        self.chunk_of(&Tensor::cat(&[&t, &zeros], 0)?)
    }

    /// This rank's chunk of a flat buffer whose size the world size divides (a view).
    pub fn chunk_of(&self, t: &Tensor) -> Result<Tensor> {
        let (w, r) = (self.comm.world_size(), self.comm.rank());
        let n = t.elem_count() / w;
        Ok(t.flatten_all()?.narrow(0, r * n, n)?)
    }
}

/// Whether reduce-scatter launches go deferred (comm's copy engines where it runs them, the
/// norm in their adds): always, unless the gradients are released during the backward
/// (ZeRO-2, FSDP); then `DDP_RELEASE_CE` (1 or 0), unset on NCCL at
/// `memplan::RELEASED_CE_WORLDS`.
pub(crate) fn deferred(comm: &dyn Communicator, opts: &DdpOptions) -> Result<bool> {
    if !opts.release_gradients {
        return Ok(true);
    }
    let what = (
        "deferred, as ZeRO-1's",
        "NCCL's kernels, collected as they go",
    );
    let asked = crate::options::switch("DDP_RELEASE_CE", what)?;
    let world = comm.world_size();
    let default = comm.backend() == "nccl" && memplan::RELEASED_CE_WORLDS.contains(&world);
    Ok(asked.unwrap_or(default))
}

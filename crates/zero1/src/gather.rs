//! The all-gathers of [`crate::Zero1Overlap`]'s step, per bucket, and when they are copied
//! into the parameters: all at once ([`Gathers::complete`]) or, ahead-of-time mode, each
//! right before the first forward stage that reads one of its parameters
//! ([`Gathers::before_stage`]); the compute stream waits on the GPU, the host never blocks.
//!
//! A parameter sharded in place is all-gathered in place, into its own storage
//! ([`Gathers::launched_in_place`]); so is a flat part that is one parameter and needs no
//! padding ([`Gathers::target`]): nothing to copy, only the wait.
//!
//! Errors are the ddp crate's (comm or candle) so they pass through
//! `Ddp::forward_backward_with`'s stage hook unchanged.

use candle_core::{DType, Tensor, Var};
use comm::Work;
use ddp::Result;

pub(crate) struct Gathers {
    /// Per bucket: its all-gathers in flight, each with the gathered flat part to copy
    /// from (`None`: gathered in place), not yet collected.
    pending: Vec<Vec<(Option<Tensor>, Work)>>,
    /// Per bucket: the parameters of its flat part, in flat order.
    flat_params: Vec<Vec<usize>>,
    /// Per forward stage: the buckets holding parameters it uses.
    stage_buckets: Vec<Vec<usize>>,
}

impl Gathers {
    /// `bucket_params[b]`: bucket b's parameters; `flat_params[b]`: those of its flat part,
    /// in flat order; `stage_params[s]`: the parameters forward stage s uses.
    pub(crate) fn new(
        bucket_params: &[Vec<usize>],
        flat_params: Vec<Vec<usize>>,
        stage_params: &[Vec<usize>],
    ) -> Self {
        let n = bucket_params.iter().flatten().max().map_or(0, |&i| i + 1);
        let mut bucket_of = vec![usize::MAX; n];
        for (b, ps) in bucket_params.iter().enumerate() {
            for &i in ps {
                bucket_of[i] = b;
            }
        }
        let stage_buckets = stage_params
            .iter()
            .map(|ps| {
                let mut bs: Vec<usize> = ps
                    .iter()
                    .filter_map(|&i| bucket_of.get(i).copied().filter(|&b| b != usize::MAX))
                    .collect();
                bs.sort_unstable();
                bs.dedup();
                bs
            })
            .collect();
        Self {
            pending: (0..bucket_params.len()).map(|_| Vec::new()).collect(),
            flat_params,
            stage_buckets,
        }
    }

    /// Where the all-gather of bucket `b`'s flat part, `len` elements with padding, goes,
    /// and whether that is the parameter itself: a flat view of its one parameter when the
    /// flat part is exactly that, else a new flat f32 buffer.
    pub(crate) fn target(&self, b: usize, len: usize, params: &[Var]) -> Result<(Tensor, bool)> {
        if let [i] = self.flat_params[b][..] {
            let p = params[i].as_tensor();
            if p.elem_count() == len && p.dtype() == DType::F32 && p.is_contiguous() {
                return Ok((p.flatten_all()?, true));
            }
        }
        let dev = params[self.flat_params[b][0]].device();
        Ok((Tensor::zeros(len, DType::F32, dev)?, false))
    }

    /// Records bucket `b`'s all-gather into `out` (from [`Self::target`]).
    pub(crate) fn launched(&mut self, b: usize, (out, in_place): (Tensor, bool), work: Work) {
        self.pending[b].push(((!in_place).then_some(out), work));
    }

    /// Records an all-gather of bucket `b` in place (into a parameter's own storage).
    pub(crate) fn launched_in_place(&mut self, b: usize, work: Work) {
        self.pending[b].push((None, work));
    }

    /// Makes the compute stream wait for, and copies, every pending bucket that stage `s`
    /// reads.
    pub(crate) fn before_stage(&mut self, s: usize, params: &[Var]) -> Result<()> {
        for k in 0..self.stage_buckets.get(s).map_or(0, Vec::len) {
            self.apply(self.stage_buckets[s][k], params)?;
        }
        Ok(())
    }

    /// Completes every pending bucket.
    pub(crate) fn complete(&mut self, params: &[Var]) -> Result<()> {
        for b in 0..self.pending.len() {
            self.apply(b, params)?;
        }
        Ok(())
    }

    fn apply(&mut self, b: usize, params: &[Var]) -> Result<()> {
        for (out, work) in std::mem::take(&mut self.pending[b]) {
            work.wait()?;
            let Some(out) = out else {
                continue; // gathered in place
            };
            let mut off = 0;
            for &i in &self.flat_params[b] {
                let p = &params[i];
                let n = p.elem_count();
                p.set(&out.narrow(0, off, n)?.reshape(p.shape())?)?;
                off += n;
            }
        }
        Ok(())
    }
}

//! The all-gathers of [`crate::Zero1Overlap`]'s step, per bucket, and when they are copied
//! into the parameters: all at once ([`Gathers::complete`]) or, ahead-of-time mode, each
//! right before the first forward stage that reads one of its parameters
//! ([`Gathers::before_stage`]); the compute stream waits on the GPU, the host never blocks.
//!
//! A bucket that is one parameter and needs no padding is gathered straight into that
//! parameter's storage ([`Gathers::target`]): nothing to copy, only the wait.
//!
//! Errors are the ddp crate's (comm or candle) so they pass through
//! `Ddp::forward_backward_with`'s stage hook unchanged.

use candle_core::{DType, Tensor, Var};
use comm::Work;
use ddp::Result;

pub(crate) struct Gathers {
    /// Per bucket: its all-gather in flight and the gathered flat bucket to copy from
    /// (`None`: gathered in place into its one parameter), not yet collected.
    pending: Vec<Option<(Option<Tensor>, Work)>>,
    /// Per bucket: its parameters' indices, in bucket (flat) order.
    bucket_params: Vec<Vec<usize>>,
    /// Per forward stage: the buckets holding parameters it uses.
    stage_buckets: Vec<Vec<usize>>,
}

impl Gathers {
    /// `bucket_params[b]`: bucket b's parameters in flat order; `stage_params[s]`: the
    /// parameters forward stage s uses.
    pub(crate) fn new(bucket_params: Vec<Vec<usize>>, stage_params: &[Vec<usize>]) -> Self {
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
            pending: (0..bucket_params.len()).map(|_| None).collect(),
            bucket_params,
            stage_buckets,
        }
    }

    /// Where bucket `b`'s all-gather of `len` elements (padding included) goes, and
    /// whether that is the parameter itself: a flat view of its one parameter when the
    /// bucket is exactly that, else a new flat f32 buffer.
    pub(crate) fn target(&self, b: usize, len: usize, params: &[Var]) -> Result<(Tensor, bool)> {
        if let [i] = self.bucket_params[b][..] {
            let p = params[i].as_tensor();
            if p.elem_count() == len && p.dtype() == DType::F32 && p.is_contiguous() {
                return Ok((p.flatten_all()?, true));
            }
        }
        let dev = params[self.bucket_params[b][0]].device();
        Ok((Tensor::zeros(len, DType::F32, dev)?, false))
    }

    /// Records bucket `b`'s all-gather into `out` (from [`Self::target`]).
    pub(crate) fn launched(&mut self, b: usize, (out, in_place): (Tensor, bool), work: Work) {
        self.pending[b] = Some(((!in_place).then_some(out), work));
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
        let Some((out, work)) = self.pending[b].take() else {
            return Ok(());
        };
        work.wait()?;
        let Some(out) = out else {
            return Ok(()); // gathered in place
        };
        let mut off = 0;
        for &i in &self.bucket_params[b] {
            let p = &params[i];
            let n = p.elem_count();
            p.set(&out.narrow(0, off, n)?.reshape(p.shape())?)?;
            off += n;
        }
        Ok(())
    }
}

//! What a deferred reduce-scatter ([`crate::Communicator::reduce_scatter_deferred_with`])
//! does besides its sums: the all-gather that makes it an all-reduce out of place, and the
//! L2 norm of this rank's reduced chunks (a gradient norm from the shards, as
//! Megatron-Core's distributed optimizer takes it). The default here composes the
//! primitives; NCCL's copy-engine reduce-scatters do both in their own launch
//! (`nccl::ce_reduce`: the gather chained to the adds, the squares summed by the adds).

use crate::error::Result;
use crate::{validate, Communicator, PendingWork, ReduceOp, Tensor, Work};
use candle_core::DType;

/// What a deferred reduce-scatter does besides its sums.
#[derive(Clone, Debug, Default)]
pub struct Deferred {
    /// Each pair is (input, buffer) of the same size: the sums go into this rank's chunk
    /// of the buffer, which is then all-gathered in place (an all-reduce out of place).
    /// Otherwise each pair is (input, this rank's output), as a reduce-scatter's.
    pub gather: bool,
    /// A one-element f32 tensor that receives the L2 norm of this rank's reduced chunks
    /// (their squares summed in f32, of the values they hold), once the handle is waited
    /// for. Inside a CUDA graph capture only where
    /// [`crate::Communicator::norm_with_sums`] says so.
    pub norm: Option<Tensor>,
    /// Not queued behind the backend's earlier deferred reduce-scatters: NCCL, where its
    /// copy engines reduce-scatter (`crate::nccl::ce_reduce`), runs this one by its kernels
    /// on a second communication stream, so that the last gradients of a backward are
    /// reduced beside the copy engines' backlog rather than after it (SMs are idle once the
    /// backward ends). Its norm then comes at the wait. Not with `gather`; elsewhere the
    /// same as without.
    pub beside: bool,
}

/// Each pair's input and where its sums go (this rank's chunk of the buffer with
/// [`Deferred::gather`]).
pub(crate) fn sums<C: Communicator + ?Sized>(
    op: &'static str,
    c: &C,
    pairs: &[(Tensor, Tensor)],
    with: &Deferred,
) -> Result<Vec<(Tensor, Tensor)>> {
    match with.gather {
        true => validate::chunks(op, c, pairs),
        false => Ok(pairs.to_vec()),
    }
}

/// The default: the reduce-scatter, the norm taken on the compute stream when it is
/// waited for, and, with a gather, the wait and the all-gather right away.
pub(crate) fn composed<C: Communicator + ?Sized>(
    c: &C,
    pairs: &[(Tensor, Tensor)],
    op: ReduceOp,
    with: &Deferred,
) -> Result<Work> {
    let chunks = sums("reduce_scatter_deferred_with", c, pairs, with)?;
    let mut work = c.reduce_scatter_deferred_async(&chunks, op)?;
    if let Some(s) = &with.norm {
        work = norm_at_wait(work, &chunks, s)?;
    }
    if !with.gather {
        return Ok(work);
    }
    work.wait()?;
    c.all_gather_coalesced_async(&gathers(chunks, pairs))
}

/// With [`Deferred::gather`], each buffer's in-place all-gather from this rank's chunk of
/// it (`sums`' outputs).
pub(crate) fn gathers(
    sums: Vec<(Tensor, Tensor)>,
    pairs: &[(Tensor, Tensor)],
) -> Vec<(Tensor, Tensor)> {
    (sums.into_iter().zip(pairs))
        .map(|((_, chunk), (_, buf))| (chunk, buf.clone()))
        .collect()
}

/// `work`, after whose wait `norm` holds the L2 norm of the pairs' outputs (candle's
/// reductions, on the compute stream).
pub(crate) fn norm_at_wait(work: Work, pairs: &[(Tensor, Tensor)], norm: &Tensor) -> Result<Work> {
    check_norm("reduce_scatter_deferred_with", norm)?;
    let outputs = pairs.iter().map(|p| p.1.clone()).collect();
    let norm = norm.clone();
    Ok(Work::new(Box::new(NormAtWait {
        work,
        outputs,
        norm,
    })))
}

/// A one-element f32 buffer, or an error naming it.
pub(crate) fn check_norm(op: &'static str, t: &Tensor) -> Result<()> {
    validate::check_buffer(op, 0, t)?;
    if t.dtype() != DType::F32 || t.elem_count() != 1 {
        let e = format!(
            "norm must be one f32 element, got {:?} of {:?}",
            t.shape(),
            t.dtype()
        );
        return Err(crate::CommError::invalid(op, 0, e));
    }
    Ok(())
}

struct NormAtWait {
    work: Work,
    outputs: Vec<Tensor>,
    norm: Tensor,
}

impl NormAtWait {
    /// `done` (a wait or a synchronisation) on the reduce-scatter, then the norm written.
    fn after(self, done: impl FnOnce(Work) -> Result<()>) -> Result<()> {
        let NormAtWait {
            work,
            outputs,
            norm,
        } = self;
        done(work)?;
        let mut total = Tensor::zeros(1, DType::F32, norm.device())?;
        for o in &outputs {
            total = (total + o.to_dtype(DType::F32)?.sqr()?.sum_all()?.reshape(1)?)?;
        }
        Ok(norm.slice_set(&total.sqrt()?, 0, 0)?)
    }
}

impl PendingWork for NormAtWait {
    fn wait(self: Box<Self>) -> Result<()> {
        self.after(Work::wait)
    }
    fn synchronize(self: Box<Self>) -> Result<()> {
        self.after(Work::synchronize)
    }
    fn is_completed(&self) -> Result<bool> {
        self.work.is_completed()
    }
}

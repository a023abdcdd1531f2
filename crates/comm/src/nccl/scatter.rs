//! [`NcclComm`]'s reduce-scatters: NCCL's kernels on the communication stream, or, for a
//! deferred launch, the copy engines (`super::ce_reduce`) or NCCL's kernels on the stream
//! beside it (`crate::Deferred::beside`).

use super::comm::NcclComm;
use super::launch_op::Call;
use crate::error::Result;
use crate::validate::{check_pair, in_place};
use crate::{ReduceOp, Tensor, Work};
use cudarc::driver::CudaStream;

impl NcclComm {
    /// Reduce-scatters of (input, output) `pairs` as one launch, checked as
    /// [`Self::all_reduce_list`] checks; where `deferred` (the caller waits after its
    /// backward), the in-place bf16 ones on the copy engines if they are on
    /// (`super::ce_reduce`). `chain`: that stream waits for their adds;
    /// `norm`: the L2 norm of the outputs, taken by the adds where
    /// [`Self::norm_in_adds`], else at the wait (`crate::Deferred::norm`); `beside`: NCCL's
    /// kernels on the second communication stream, where there is one
    /// (`crate::Deferred::beside`).
    pub(super) fn reduce_scatter_list(
        &self,
        name: &'static str,
        code: i64,
        pairs: &[(&Tensor, &Tensor)],
        op: ReduceOp,
        (deferred, chain, norm, beside): (bool, Option<&CudaStream>, Option<&Tensor>, bool),
    ) -> Result<Work> {
        for &(input, output) in pairs {
            check_pair(name, self.rank, self.world, output, input)?;
            self.check_cuda(name, input)?;
            self.check_cuda(name, output)?;
        }
        for &(input, _) in pairs {
            self.agree(name, code, input.elem_count(), input.dtype(), 0)?;
        }
        let calls = self.scatter_calls(name, pairs, op)?;
        let side = self
            .beside
            .as_ref()
            .filter(|_| deferred && beside && chain.is_none());
        let ce = deferred && self.windows.ce_reduce && side.is_none();
        let fused = norm.filter(|_| ce && self.norm_in_adds(&calls));
        let work = if let Some(side) = side {
            self.launch_on(name, &calls, side)?
        } else if ce && calls.iter().any(super::ce_reduce::reducible) {
            // The others by NCCL first (their waits come first), then these.
            let (ce, rest): (Vec<_>, Vec<_>) =
                calls.iter().copied().partition(super::ce_reduce::reducible);
            let rest = self.launch_all(name, &rest)?;
            let ce = self.launch_ce_reduce(name, &ce, (chain, fused))?;
            Work::all(vec![rest, ce])
        } else {
            self.launch_all(name, &calls)?
        };
        match norm {
            Some(t) if fused.is_none() => {
                let pairs: Vec<(Tensor, Tensor)> =
                    pairs.iter().map(|&(i, o)| (i.clone(), o.clone())).collect();
                crate::deferred::norm_at_wait(work, &pairs, t)
            }
            _ => Ok(work),
        }
    }

    /// Each reduce-scatter pair's call: in place where the output is this rank's chunk of
    /// the input (then the call writes the input, where that chunk lies).
    pub(super) fn scatter_calls<'a>(
        &self,
        name: &'static str,
        pairs: &[(&'a Tensor, &'a Tensor)],
        op: ReduceOp,
    ) -> Result<Vec<(Call, &'a Tensor, Option<&'a Tensor>)>> {
        let op = self.op(op);
        let mut calls = Vec::with_capacity(pairs.len());
        for &(i, o) in pairs {
            calls.push(match in_place(name, self.rank, o, i)? {
                true => {
                    let (small, at) = (o.elem_count(), self.rank * o.elem_count());
                    (Call::ReduceScatterInPlace { op, small, at }, i, None)
                }
                false => (Call::ReduceScatter(op), o, Some(i)),
            });
        }
        Ok(calls)
    }

    /// Whether the copy-engine adds of a deferred launch of `calls` take its norm: they
    /// add every one of them.
    pub(super) fn norm_in_adds(&self, calls: &[(Call, &Tensor, Option<&Tensor>)]) -> bool {
        self.windows.ce_reduce && !calls.is_empty() && calls.iter().all(super::ce_reduce::reducible)
    }

    /// The reduction NCCL is asked for. On one rank an average is the value itself: NCCL
    /// runs its float `Avg` there as a multiply by 1 over the whole buffer, `Sum` in place as
    /// nothing at all (the same bits).
    pub(super) fn op(&self, op: ReduceOp) -> ReduceOp {
        match op {
            ReduceOp::Avg if self.world == 1 => ReduceOp::Sum,
            op => op,
        }
    }
}

//! The chained gathers' own streams (`COMM_CE_GATHER_LANE`: 1 or 0; by default on where
//! both the gathers and the reduce-scatters go by the copy engines, as DDP's split
//! all-reduce does at world 2). A deferred reduce-scatter with a gather
//! (`crate::Deferred::gather`) chains the all-gather of its sums to its adds. On the
//! communication stream `S`, the chain made every later launch's copies wait for this
//! launch's adds and gather: the copy engines stood idle while the adds ran, at each of
//! the step's launches, and fell behind the backward (call 310, nvidia-h200-x2: xl's
//! bucketed:25 ended its backward with 1.5 ms of copies still to make). On a lane of its
//! own (an `S` and one stream per peer, as `super::ce`'s gathers use) the gather waits for
//! the adds, and `S` goes on with the next launch's copies at once. The gathers keep their
//! order among themselves (one lane), so their windows' flags keep the protocol of
//! `super::ce_schedule`; a launch takes the lane only where every reduce-scatter of it
//! goes by the copy engines (its sums then come from its adds alone) and every gather too.

use super::ce::{CePlan, Lane};
use super::comm::NcclComm;
use super::launch_op::Call;
use crate::error::Result;
use crate::validate::{check_pair, in_place};
use crate::{ReduceOp, Tensor, Work};
use cudarc::driver::{CudaContext, CudaStream};
use std::sync::Arc;

/// The chained gathers' `S` and peer streams.
pub(crate) struct GatherLane {
    pub(super) stream: Arc<CudaStream>,
    peers: Vec<Arc<CudaStream>>,
}

impl GatherLane {
    /// A lane where `on` (gathers and reduce-scatters both on the copy engines) unless
    /// `COMM_CE_GATHER_LANE` (`env`) is 0; 1 asks for it where it cannot be (then none).
    pub(super) fn new(
        on: bool,
        env: Option<&str>,
        ctx: &Arc<CudaContext>,
        world: usize,
    ) -> Result<Option<Self>> {
        if !(super::adds_policy::gather_lane(env)?.unwrap_or(true) && on && world > 1) {
            return Ok(None);
        }
        Ok(Some(Self {
            stream: super::device::comm_stream(ctx)?,
            peers: super::ce::peer_streams(true, ctx, world)?,
        }))
    }

    fn lane(&self) -> Lane<'_> {
        (&self.stream, &self.peers)
    }
}

impl NcclComm {
    /// Each all-gather pair's call (in place where the input is this rank's chunk of the
    /// output), the pairs checked; `agree`: also against the other ranks' (a collective:
    /// once a launch, on every rank).
    pub(super) fn gather_calls<'a>(
        &self,
        name: &'static str,
        pairs: &'a [(Tensor, Tensor)],
        agree: bool,
    ) -> Result<Vec<(Call, &'a Tensor, Option<&'a Tensor>)>> {
        let mut calls = Vec::with_capacity(pairs.len());
        for (input, output) in pairs {
            check_pair(name, self.rank, self.world, input, output)?;
            self.check_cuda(name, input)?;
            if agree {
                self.agree(name, 3, input.elem_count(), input.dtype(), 0)?;
            }
            calls.push(match in_place(name, self.rank, input, output)? {
                true => {
                    let (small, at) = (input.elem_count(), self.rank * input.elem_count());
                    (Call::AllGatherInPlace { small, at }, output, None)
                }
                false => (Call::AllGather, output, Some(input)),
            });
        }
        Ok(calls)
    }

    /// The lane for a deferred launch's reduce-scatters of `refs` and the gathers of their
    /// sums `gathers` chained to them, and those gathers' copy-engine plan: the chained
    /// gathers' own, where there is one and every one of both goes by the copy engines.
    pub(super) fn gather_lane_for(
        &self,
        name: &'static str,
        refs: &[(&Tensor, &Tensor)],
        op: ReduceOp,
        gathers: &[(Tensor, Tensor)],
    ) -> Result<Option<(&GatherLane, CePlan)>> {
        let Some(lane) = &self.gather_lane else {
            return Ok(None);
        };
        let scatters = self.scatter_calls(name, refs, op)?;
        if scatters.is_empty() || !scatters.iter().all(super::ce_reduce::reducible) {
            return Ok(None);
        }
        let calls = self.gather_calls(name, gathers, false)?;
        Ok(match self.ce_plan(&calls)? {
            Some(plan) if plan.1.is_empty() => Some((lane, plan)),
            _ => None,
        })
    }

    /// The copy-engine gathers of `pairs` on `lane`, by the plan [`Self::gather_lane_for`]
    /// made of them (each window's, as `launch_on` queues them on the communication
    /// stream), after the other ranks' pairs are checked against these and `lane`'s stream
    /// has waited for compute.
    pub(super) fn gather_on_lane(
        &self,
        name: &'static str,
        pairs: &[(Tensor, Tensor)],
        (lane, (windows, _)): (&GatherLane, CePlan),
    ) -> Result<Work> {
        for (input, _) in pairs {
            self.agree(name, 3, input.elem_count(), input.dtype(), 0)?;
        }
        let keep: Vec<Tensor> = pairs.iter().map(|p| p.1.clone()).collect();
        let works = (windows.iter())
            .map(|(span, parts)| self.launch_ce(name, *span, parts, keep.clone(), lane.lane()))
            .collect::<Result<Vec<_>>>()?;
        Ok(Work::all(works))
    }
}

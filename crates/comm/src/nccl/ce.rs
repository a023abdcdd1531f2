//! Copy-engine all-gathers (by default at world 2 on one node; `COMM_CE_GATHER=1` or `0`
//! says otherwise: `super::policy`): an in-place all-gather into a gather
//! buffer (`super::window`) moves each rank's part between the ranks' buffers with
//! `cuMemcpyAsync`, one stream per peer, so that it takes no SM from the compute stream's
//! kernels. (Any SM held beside a GEMM costs it: at world 4, one Triton kernel adding a
//! reduce-scatter's parts on 4 SMs cost GEMMs 4.6 ms of 19.7, on 32 SMs 6.9; the copies
//! alone cost them 1.4-1.8 ms, NCCL's all-gather 8.5-8.9: ce-probe.py, calls 163-164.)
//! NCCL's own copy-engine path (`NCCL_CTA_POLICY=2`) issues a gather's copies one after
//! another on one stream under graph capture and puts a barrier around every gather (its
//! `src/ce_coll.cc`); here the peers' copies run side by side.
//!
//! Each window holds `2 × world` u32 flags after its buffer, zeroed before it is
//! registered: "ready" and "done" from each rank. One gather on the communication stream
//! `S`, which has waited for the compute stream (so nothing here still reads this rank's
//! buffer, and this rank's part of it is written):
//! 1. `S` sets "ready from me" in every peer's window: the peer may write into this
//!    rank's buffer.
//! 2. Per peer q, on its stream: wait until q's "ready" here is 1, set it back to 0, copy
//!    this rank's parts into q's buffer, set "done from me" in q's window.
//! 3. `S` waits for the peers' streams, then until every peer's "done" here is 1, and
//!    sets them back to 0: every part has arrived. The [`Work`] is recorded after that.
//!
//! With `COMM_CE_ONE_STREAM=1` step 2 runs on one stream for all peers, from this rank + 1
//! on: one copy at a time, so that a GPU takes in from about one peer at a time (a switch
//! to measure at world 4, where three copies at once bring in 200-230 GB/s: session 41).
//!
//! The order is `super::ce_schedule`'s, whose tests run it on every rank at random
//! interleavings without CUDA. Every flag is set by one peer and reset by its owner before
//! the owner lets that peer set it again (a peer sets "ready" for the next gather only
//! after its own step 3, which waits for this rank's "done", which follows the reset), so
//! the flags end every gather at 0, as a CUDA graph replay needs. Stream memory operations
//! and copies are captured as graph nodes. A peer that never comes leaves `S` waiting: the
//! watchdog fails the rank after the timeout, as for NCCL's own calls. (Reading the peers'
//! parts instead, pulling, took the same time and needs a barrier after the copies: calls
//! 162-164.)

use super::cast::address;
use super::ce_schedule::{schedule, Flag, Op, Schedule};
use super::comm::{drv, NcclComm};
use super::events::EventLog;
use super::launch_op::Call;
use super::window::Span;
use crate::error::Result;
use crate::{Tensor, Work};
use cudarc::driver::sys::{self, CUstream};
use cudarc::driver::{result, CudaContext, CudaStream};
use std::sync::Arc;

/// A launch's `S` and its peer streams.
pub(super) type Lane<'a> = (&'a CudaStream, &'a [Arc<CudaStream>]);

/// The streams the copies run on: one per peer (`world - 1`), or none with the copy
/// engines off.
pub(super) fn peer_streams(
    on: bool,
    ctx: &Arc<CudaContext>,
    world: usize,
) -> Result<Vec<Arc<CudaStream>>> {
    match on {
        true => (1..world)
            .map(|_| super::device::comm_stream(ctx))
            .collect(),
        false => Ok(Vec::new()),
    }
}

/// Sets the u32 at `at` (here, or a peer's mapped here) to `value` on stream `s`.
fn write(s: CUstream, at: u64, value: u32) -> Result<()> {
    // SAFETY: `at` is a flag of a live window, here or mapped from a peer (`Span`).
    unsafe { sys::cuStreamWriteValue32_v2(s, at, value, 0) }
        .result()
        .map_err(drv("cuStreamWriteValue32"))
}

/// Stream `s` waits until the u32 at `at` (this rank's) is 1.
fn wait_one(s: CUstream, at: u64) -> Result<()> {
    let eq = sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_EQ as u32;
    // SAFETY: `at` is a flag of a live window of this rank's.
    unsafe { sys::cuStreamWaitValue32_v2(s, at, 1, eq) }
        .result()
        .map_err(drv("cuStreamWaitValue32"))
}

/// Per buffer of a call: its address and the bytes of one rank's part.
pub(super) type Parts = Vec<(u64, u64)>;

/// A launch's gathers that the copy engines take, by window, and the indices of the calls
/// that NCCL takes ([`NcclComm::ce_plan`]).
pub(super) type CePlan = (Vec<(Span, Parts)>, Vec<usize>);

impl NcclComm {
    /// The calls the copy engines take: the in-place all-gathers into windows with
    /// copy-engine flags among `calls`, by window (its span, each buffer's address and part
    /// bytes), and the indices of the others, which NCCL takes. (A ZeRO-1 bucket gathers its
    /// bf16 copies in a window and its small f32 parameters outside any, in one launch; a
    /// split DDP launch at world 4 gathers into a window per gradient. Until session 38 such
    /// a launch went to NCCL whole.) `None`: NCCL takes all.
    pub(super) fn ce_plan(
        &self,
        calls: &[(Call, &Tensor, Option<&Tensor>)],
    ) -> Result<Option<CePlan>> {
        if !self.windows.ce || self.world < 2 {
            return Ok(None);
        }
        let (mut windows, mut rest): CePlan = (Vec::new(), Vec::new());
        for (i, &(call, dst, _)) in calls.iter().enumerate() {
            let Call::AllGatherInPlace { small, .. } = call else {
                rest.push(i);
                continue;
            };
            let esz = dst.dtype().size_in_bytes() as u64;
            let at = address(dst, esz, &self.stream)?;
            let part = small as u64 * esz;
            let span = (self.windows.span_of(at))
                .filter(|s| at + part * self.world as u64 <= s.base + s.bytes);
            match span {
                Some(s) => match windows.iter_mut().find(|w| w.0.base == s.base) {
                    Some(w) => w.1.push((at, part)),
                    None => windows.push((s, vec![(at, part)])),
                },
                None => rest.push(i),
            }
        }
        Ok((!windows.is_empty()).then_some((windows, rest)))
    }

    /// Queues the copy-engine gather of `parts` in window `w` (see the module's doc), its
    /// `S` and peer streams `lane`'s (the communication stream's, or the chained gathers'
    /// own: `super::ce_lane`).
    pub(super) fn launch_ce(
        &self,
        op: &'static str,
        w: Span,
        parts: &[(u64, u64)],
        keep: Vec<Tensor>,
        lane: Lane<'_>,
    ) -> Result<Work> {
        let s = lane.0;
        self.before(s)?;
        let timing = self.log().is_some();
        let start = timing.then(|| EventLog::begin(s)).transpose()?;
        let sch = schedule(self.rank, self.world, self.ce_one_stream);
        let push = |s: CUstream, to: usize| {
            for &(at, part) in parts {
                let off = at - w.base + self.rank as u64 * part;
                // SAFETY: both ends lie in the window's buffers (`ce_plan` checked the
                // bounds here; every rank's buffer has the same size), which outlive the
                // copy (the Work holds the tensors; the windows go with the communicator).
                unsafe {
                    result::memcpy_dtod_async(w.peer(to, off), w.base + off, part as usize, s)
                }
                .map_err(drv("cuMemcpyAsync (copy-engine gather)"))?;
            }
            Ok(())
        };
        for &o in &sch.first {
            flag_op(s.cu_stream(), w, o, &push)?;
        }
        self.ce_peers_then_last(w, &sch, &push, lane)?;
        if let (Some(start), Some(log)) = (start, self.log().as_mut()) {
            let bytes = parts.iter().map(|p| p.1 * self.world as u64).sum::<u64>();
            log.end(s, op, bytes as usize, start)?;
        }
        self.after(op, keep, s)
    }

    /// The communication stream and the peer streams: where every copy-engine launch but
    /// the chained gathers runs.
    pub(super) fn main_lane(&self) -> Lane<'_> {
        (&self.stream, &self.ce_streams)
    }

    /// Queues `sch`'s peers' operations in window `w`, each list on one of `lane`'s peer
    /// streams forked from its `S`, then, once they have ended, its `last` on `S`;
    /// `push(s, to)` makes the copies into rank `to` (a gather's here, a reduce-scatter's
    /// in `super::ce_reduce`).
    pub(super) fn ce_peers_then_last(
        &self,
        w: Span,
        sch: &Schedule,
        push: &dyn Fn(CUstream, usize) -> Result<()>,
        (s, peers): Lane<'_>,
    ) -> Result<()> {
        let fork = s.record_event(None).map_err(drv("cuEventRecord"))?;
        for (ops, ps) in sch.peers.iter().zip(peers) {
            ps.wait(&fork).map_err(drv(
                "cuStreamWaitEvent (copy-engine peer stream after the communication stream)",
            ))?;
            for &o in ops {
                flag_op(ps.cu_stream(), w, o, push)?;
            }
            let e = ps.record_event(None).map_err(drv("cuEventRecord"))?;
            s.wait(&e).map_err(drv(
                "cuStreamWaitEvent (communication stream after a peer stream)",
            ))?;
        }
        for &o in &sch.last {
            flag_op(s.cu_stream(), w, o, push)?;
        }
        Ok(())
    }
}

/// Queues `op` on stream `s` in window `w` (flags here and at the peers), `push(s, to)`
/// doing its copies into rank `to`.
pub(super) fn flag_op(
    s: CUstream,
    w: Span,
    op: Op,
    push: &dyn Fn(CUstream, usize) -> Result<()>,
) -> Result<()> {
    let flag = |f: Flag| match f {
        Flag::Ready(r) => w.ready(r),
        Flag::Done(r) => w.done(r),
    };
    match op {
        Op::Set { at, flag: f } => write(s, w.peer(at, flag(f)), 1),
        Op::Wait(f) => wait_one(s, w.base + flag(f)),
        Op::Reset(f) => write(s, w.base + flag(f), 0),
        Op::Push { to } => push(s, to),
    }
}

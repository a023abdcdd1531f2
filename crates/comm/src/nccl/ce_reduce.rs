//! Copy-engine reduce-scatters (by default at worlds 2 and 4 on one node; `COMM_CE_REDUCE=1`
//! or `0` says otherwise: `super::policy`): the bf16 reduce-scatters (Sum or Avg; in place,
//! or into another buffer: DDP's split all-reduce sums into its gather buffers) of one
//! deferred launch ([`crate::Communicator::reduce_scatter_deferred_async`]) push each
//! peer's chunk of every buffer into that peer's window with `cuMemcpyAsync`, one stream per
//! peer, so that they take no SM from the backward's GEMMs (NCCL's reduce-scatter beside
//! them cost GEMMs 5.9-7.6 ms of 20; copies 0.4-1.8: ce-probe.py, calls 160-164). The adds
//! are one memory-bound kernel (kernels/sum.cu: this rank's chunk plus the peers' parts, in
//! f32, rounded once), queued on a stream of their own as soon as the parts have arrived, so
//! that they run beside the backward (`COMM_CE_ADDS=wait`: on the compute stream at
//! [`Work::wait`], where a step waits for its gradients after the backward). xl's zero1 took
//! 0.75 ms less a step at world 4 and 1.2-1.3 ms less at world 2 (calls 166-167,
//! docs/results/gpus-s31.md); the adds as the parts arrive another 0.61 and 0.43 ms (call
//! 173, docs/results/gpus-s32.md).
//!
//! Each open launch holds a window of its own, registered when first needed (eager): the
//! first of its buffers' shape that no open launch holds (`super::ce_windows`; ZeRO-1's
//! launches, all open until the backward ends, take one each; ZeRO-2's, waited for two
//! stages on, reuse the closed ones). Rank r's window holds, per buffer,
//! `world - 1` slots of its chunk (the peers' parts, in rank order without r), then
//! `2 × world` u32 flags: "ready" from each peer, 1 at the start (the slots are free), and
//! "done". One launch on rank r, after its communication stream `S` has waited for
//! compute, in `super::ce_schedule`'s order:
//! 1. per peer q, on its stream: wait until q's "ready" here is 1 (q has added the last
//!    parts r pushed it), set it to 0, push r's chunk q of every buffer into r's slot at q,
//!    set "done from r" in q's window;
//! 2. `S` joins the peers' streams, waits until every peer's "done" here is 1 and sets
//!    them back to 0: every part has arrived, and r's buffers are read. The [`Work`] is
//!    recorded after that.
//! 3. The adds' stream waits for `S`, adds, and sets "ready from r" in every peer's window;
//!    [`Work::wait`] (or dropping it) makes the compute stream wait for that. With
//!    `COMM_CE_ADDS=wait` the compute stream does all three at the wait.
//!
//! A deferred launch with more (`crate::Deferred`) may also chain an all-gather of the sums
//! to the adds (the communication stream waits for them; with `COMM_CE_ADDS=wait` the adds
//! run on it), and sum the squares of what the adds write (each block its own, then one
//! kernel over them in order: `super::ce_adds`).
//!
//! So every flag ends a step as it began, as a CUDA graph replay needs. A peer that never
//! comes leaves `S` waiting: the watchdog fails the rank after the timeout.

use super::cast::address;
use super::ce_adds::{launches, CeReduceWork, Runs, RUNS};
use super::ce_schedule::schedule;
use super::ce_windows::Windows;
use super::comm::{capturing, drv, NcclComm};
use super::events::EventLog;
use super::launch_op::Call;
use super::window::{Span, Use};
use crate::error::{CommError, Result};
use crate::{ReduceOp, Tensor, Work};
use candle_core::cuda_backend::cudarc::driver::result;
use candle_core::DType;
use cudarc::driver::sys::CUstream;
use cudarc::driver::CudaStream;

const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/sum.ptx"));

/// One launch's window: where each buffer's slots begin, and where the adds' blocks write
/// their sums of squares (after the slots).
pub(super) struct Group {
    offsets: Vec<u64>,
    partials: u64,
    span: Span,
}

/// The launches' windows, each held by at most one open launch (`super::ce_windows`).
#[derive(Default)]
pub(super) struct Reduces {
    pub(super) windows: Windows<Group>,
}

/// Whether `call` runs here: a bf16 reduce-scatter that sums or averages, in place or
/// into another buffer (DDP's split all-reduce: into a gather buffer, `ddp::split`).
pub(super) fn reducible((call, dst, src): &(Call, &Tensor, Option<&Tensor>)) -> bool {
    let op = match (call, src) {
        (Call::ReduceScatterInPlace { op, .. }, None) => op,
        (Call::ReduceScatter(op), Some(s)) if s.dtype() == DType::BF16 => op,
        _ => return false,
    };
    matches!(op, ReduceOp::Sum | ReduceOp::Avg) && dst.dtype() == DType::BF16
}

/// Rank `from`'s slot in rank `to`'s window: the peers in rank order, `to` left out.
fn slot(from: usize, to: usize) -> u64 {
    (from - usize::from(from > to)) as u64
}

impl NcclComm {
    /// The window of a launch of buffers of `chunks` elements a rank, opened: the first of
    /// that shape no open launch holds, else a new one, registered (`super::ce_windows`).
    /// Its index, span, each buffer's slots' offset, and where the sums of squares go.
    fn group(&self, name: &'static str, chunks: &[u64]) -> Result<(usize, Span, Vec<u64>, u64)> {
        let mut r = self.reduces.lock().unwrap_or_else(|e| e.into_inner());
        let i = match r.windows.open(chunks) {
            Some(i) => i,
            None => {
                if capturing(&self.stream) {
                    let k = r.windows.of_shape(chunks);
                    let e = format!(
                        "copy-engine reduce-scatters (COMM_CE_REDUCE=0 turns them off): a \
                         window for {} launches of chunks of {chunks:?} elements open at once \
                         is new during a CUDA graph capture (a window is registered at the \
                         first, eager, step that needs it)",
                        k + 1
                    );
                    return Err(CommError::invalid(name, self.rank, e));
                }
                let mut offsets = Vec::with_capacity(chunks.len());
                let mut end = 0u64;
                for c in chunks {
                    offsets.push(end);
                    end += (2 * c * (self.world as u64 - 1)).next_multiple_of(256);
                }
                let partials = end;
                let blocks: u64 = launches(chunks)
                    .iter()
                    .map(|&(x, y)| u64::from(x) * u64::from(y))
                    .sum();
                end += 4 * blocks;
                let span = self.register(Use::Reduce, end)?.1;
                let span = span.ok_or_else(|| CommError::invalid(name, self.rank, "no span"))?;
                let group = Group {
                    offsets,
                    partials,
                    span,
                };
                r.windows.add(chunks.to_vec(), group)
            }
        };
        let g = r.windows.get(i);
        let g = g.ok_or_else(|| CommError::invalid(name, self.rank, "no window"))?;
        Ok((i, g.span, g.offsets.clone(), g.partials))
    }

    /// Queues the copy-engine reduce-scatter of `calls` (each [`reducible`]): see the
    /// module's doc. With `chain`, that stream (the communication stream, or the chained
    /// gathers' own: `super::ce_lane`) also waits for the adds (queued at the launch, on
    /// their own stream where there is one), so that what is queued on it next reads the
    /// sums (an all-gather of them: `crate::Deferred::gather`).
    /// With `norm` (one f32), the adds also sum the squares of what they write, each block
    /// into the window, and one more kernel sums the blocks' in order, its root into `norm`.
    pub(super) fn launch_ce_reduce(
        &self,
        op: &'static str,
        calls: &[(Call, &Tensor, Option<&Tensor>)],
        (chain, norm): (Option<&CudaStream>, Option<&Tensor>),
    ) -> Result<Work> {
        let (me, world) = (self.rank, self.world);
        let mut chunks = Vec::with_capacity(calls.len());
        let mut scales = Vec::with_capacity(calls.len());
        for (call, dst, _) in calls {
            let (op, small) = match *call {
                Call::ReduceScatterInPlace { op, small, .. } => (op, small),
                Call::ReduceScatter(op) => (op, dst.elem_count()),
                _ => unreachable!("reducible calls only"),
            };
            chunks.push(small as u64);
            scales.push(if op == ReduceOp::Avg {
                1.0 / world as f32
            } else {
                1.0
            });
        }
        let dev = self.device().as_cuda_device()?;
        let func = dev.get_or_load_custom_func("comm_sum_parts", "comm_sum", PTX)?;
        let (window, span, offsets, partials) = self.group(op, &chunks)?;
        let squares = match norm {
            Some(t) => {
                let f = dev.get_or_load_custom_func("comm_sumsq", "comm_sum", PTX)?;
                let out = address(t, 4, &self.stream)?;
                Some(((*f).clone(), span.base + partials, out))
            }
            None => None,
        };
        // From here the launch is open: the work's drop closes it, also on an error.
        let mut work = CeReduceWork {
            inner: None,
            compute: self.compute.clone(),
            func: (*func).clone(),
            runs: Vec::new(),
            squares,
            freed: (span, Vec::new()),
            parts: world as u32 - 1,
            reduces: (self.reduces.clone(), window),
            added: None,
            at_launch: false,
            finished: false,
        };
        self.before(&self.stream)?;
        let timing = self.log().is_some();
        let start = timing.then(|| EventLog::begin(&self.stream)).transpose()?;
        // Each call's whole input, and where its sum goes (in place: its own chunk).
        let at: Vec<u64> = calls
            .iter()
            .map(|(_, t, src)| address(src.unwrap_or(t), 2, &self.stream))
            .collect::<Result<_>>()?;
        let out: Vec<u64> = (calls.iter().zip(&at).zip(&chunks))
            .map(|(((_, t, src), &a), &c)| match src {
                None => Ok(a + me as u64 * 2 * c),
                Some(_) => address(t, 2, &self.stream),
            })
            .collect::<Result<_>>()?;
        // A gather's order (`super::ce_schedule`), its `first` (this rank's slots are
        // free) at the wait, after the adds (see the module's doc).
        let sch = schedule(me, world, self.ce_one_stream);
        let push = |s: CUstream, q: usize| {
            for ((&a, &c), &o) in at.iter().zip(&chunks).zip(&offsets) {
                let to = span.peer(q, o + slot(me, q) * 2 * c);
                // SAFETY: rank me's chunk q of a buffer of world × c bf16, into its slot in
                // q's window (registered with room for it); the work holds the buffer until
                // the compute stream has waited for these copies.
                unsafe { result::memcpy_dtod_async(to, a + q as u64 * 2 * c, 2 * c as usize, s) }
                    .map_err(drv("cuMemcpyAsync (copy-engine reduce-scatter)"))?;
            }
            Ok(())
        };
        self.ce_peers_then_last(span, &sch, &push, self.main_lane())?;
        if let (Some(start), Some(log)) = (start, self.log().as_mut()) {
            let bytes = chunks.iter().map(|c| 2 * c * world as u64).sum::<u64>();
            log.end(&self.stream, op, bytes as usize, start)?;
        }
        let mut runs = Vec::new();
        for k in (0..calls.len()).step_by(RUNS) {
            let mut r = Runs::default();
            for j in k..(k + RUNS).min(calls.len()) {
                let (c, i) = (chunks[j], j - k);
                (r.own[i], r.dst[i]) = (at[j] + me as u64 * 2 * c, out[j]);
                (r.src[i], r.n[i], r.stride[i]) = (span.base + offsets[j], c, c);
                r.scale[i] = scales[j];
            }
            runs.push(r);
        }
        work.runs = runs;
        work.freed = (span, sch.first);
        let keep = calls
            .iter()
            .flat_map(|c| std::iter::once(c.1).chain(c.2))
            .chain(norm)
            .cloned()
            .collect();
        work.inner = Some(self.after(op, keep, &self.stream)?);
        if let Some(adds) = &self.adds {
            // The adds as soon as the parts are in (`COMM_CE_ADDS`), beside what compute
            // does next; the wait then only orders compute after them.
            let arrived = self
                .stream
                .record_event(None)
                .map_err(drv("cuEventRecord"))?;
            adds.wait(&arrived)
                .map_err(drv("cuStreamWaitEvent (adds after the parts)"))?;
            // Queued here or nowhere: a failure below leaves nothing for the wait to add.
            work.at_launch = true;
            work.queue_adds(adds)?;
            let added = adds.record_event(None).map_err(drv("cuEventRecord"))?;
            if let Some(c) = chain {
                c.wait(&added).map_err(drv(
                    "cuStreamWaitEvent (communication stream after the adds)",
                ))?;
            }
            work.added = Some(added);
        } else if let Some(c) = chain {
            // The adds on the communication stream itself, right after the parts.
            work.at_launch = true;
            work.queue_adds(&self.stream)?;
            let added = self
                .stream
                .record_event(None)
                .map_err(drv("cuEventRecord"))?;
            c.wait(&added).map_err(drv(
                "cuStreamWaitEvent (chained gathers' stream after the adds)",
            ))?;
            work.added = Some(added);
        }
        Ok(Work::new(Box::new(work)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_peer_has_its_own_slot_in_rank_order() {
        for world in 2..=8 {
            for to in 0..world {
                let slots: Vec<u64> = (0..world)
                    .filter(|&f| f != to)
                    .map(|f| slot(f, to))
                    .collect();
                assert_eq!(slots, (0..world as u64 - 1).collect::<Vec<_>>());
            }
        }
    }
}

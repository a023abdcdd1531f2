//! [`NcclComm`]: the [`Communicator`] over NCCL for candle CUDA tensors.
//!
//! Ordering: before each collective the communication stream waits for an event recorded
//! on candle's compute stream (so the collective sees every queued write); after it, an
//! event is recorded on the communication stream. [`Work::wait`] makes the compute
//! stream wait for that event; [`Work::synchronize`] blocks the host on it. cudarc's
//! per-allocation events additionally order later uses and frees of the buffers.

use super::events::EventLog;
use super::launch_op::{Call, Launch};
use super::raw::{unique_id, RawComm};
use super::watchdog::{Pending, Watchdog};
use super::window::Windows;
use super::work::NcclWork;
use crate::error::{CommError, Result};
use crate::validate::check_buffer;
use crate::{store, CommOptions, DistEnv, ReduceOp, Tensor, Work};
use candle_core::Device;
use cudarc::driver::{CudaStream, DriverError};
use cudarc::nccl::result::{group_end, group_start};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub(super) fn drv(call: &'static str) -> impl Fn(DriverError) -> CommError {
    move |e| CommError::Cuda {
        call,
        msg: format!("{e:?}"),
    }
}

/// Whether `stream` is being captured into a CUDA graph (asked of the driver: cudarc's
/// own query first takes any error its context recorded, and reads as "no" then).
pub(super) fn capturing(stream: &CudaStream) -> bool {
    use cudarc::driver::{result, sys::CUstreamCaptureStatus as S};
    // SAFETY: the stream is alive for the call.
    matches!(
        unsafe { result::stream::is_capturing(stream.cu_stream()) },
        Ok(S::CU_STREAM_CAPTURE_STATUS_ACTIVE)
    )
}

/// One rank of an NCCL group, bound to one GPU.
pub struct NcclComm {
    pub(super) rank: usize,
    pub(super) world: usize,
    device: Device,
    pub(super) compute: Arc<CudaStream>,
    pub(super) stream: Arc<CudaStream>,
    pub(super) raw: Arc<RawComm>,
    pub(super) opts: CommOptions,
    pub(super) seq: AtomicU64,
    pub(super) watchdog: Watchdog,
    pub(super) timeline: Mutex<Option<EventLog>>,
    /// `COMM_NCCL_LAUNCH_IDENTITY=1`: launch one rank's identity calls anyway
    /// ([`Self::identity`]), to measure what skipping them saves.
    launch_identity: bool,
    /// Gather buffers registered as NCCL windows (`super::window`).
    pub(super) windows: Windows,
    /// One stream per peer for the copy-engine gathers (`super::ce`) and reduce-scatters
    /// (`super::ce_reduce`); none when both are off.
    pub(super) ce_streams: Vec<Arc<CudaStream>>,
    /// `COMM_CE_ONE_STREAM=1`: the copies one at a time, on the first of them
    /// (`super::ce_schedule::one_stream`).
    pub(super) ce_one_stream: bool,
    /// The copy-engine reduce-scatters' windows and open launches.
    pub(super) reduces: Arc<Mutex<super::ce_reduce::Reduces>>,
    /// The stream of their adds as the parts arrive (`COMM_CE_ADDS`); `None`: the adds run
    /// on the compute stream at the wait, or there are no copy-engine reduce-scatters.
    pub(super) adds: Option<Arc<CudaStream>>,
    /// Where the copy-engine reduce-scatters are on: a second communication stream, for
    /// the deferred reduce-scatters that go beside their queue ([`crate::Deferred::beside`]).
    pub(super) beside: Option<Arc<CudaStream>>,
    /// The chained gathers' own `S` and peer streams (`super::ce_lane`), where both the
    /// gathers and the reduce-scatters are on the copy engines.
    pub(super) gather_lane: Option<super::ce_lane::GatherLane>,
}

impl NcclComm {
    /// Opens GPU `device_ordinal`, meets the other ranks at the store named by `env`,
    /// and initialises NCCL. Fails on every rank if a rank does not arrive in time.
    pub fn new(env: &DistEnv, device_ordinal: usize, opts: CommOptions) -> Result<Self> {
        let device = super::cuda_device(device_ordinal)?;
        let compute = device.as_cuda_device()?.cuda_stream();
        let ctx = compute.context().clone();
        let stream = super::device::comm_stream(&ctx)?;
        let id = store::rendezvous(env, opts.timeout, || Ok(unique_id()?.to_vec()))?;
        let id: [u8; 128] = id.try_into().map_err(|v: Vec<u8>| CommError::Store {
            addr: format!("{}:{}", env.master_addr, env.master_port),
            msg: format!("NCCL id of {} bytes, expected 128", v.len()),
        })?;
        ctx.bind_to_thread().map_err(drv("cuCtxSetCurrent"))?;
        let here = super::engines::windows_here(env.world_size)?;
        let cta = std::env::var("NCCL_CTA_POLICY").ok();
        let cta =
            super::policy::nccl_cta_policy(cta.as_deref(), here.0, super::raw::version(), here.1);
        super::engines::NCCL_CE_ON.fetch_or(cta.is_some(), std::sync::atomic::Ordering::Relaxed);
        let raw = Arc::new(RawComm::init(env.rank, env.world_size, id, cta)?);
        let watchdog = Watchdog::start(raw.clone(), env.rank, opts.timeout);
        let windows = Windows::new(raw.clone(), here, compute.clone(), stream.clone())?;
        let ce = windows.ce || windows.ce_reduce;
        let ce_streams = super::ce::peer_streams(ce, &ctx, env.world_size)?;
        let one = std::env::var("COMM_CE_ONE_STREAM").ok();
        let ce_one_stream = super::ce_schedule::one_stream(one.as_deref())?;
        let at_arrival =
            super::adds_policy::adds_at_arrival(std::env::var("COMM_CE_ADDS").ok().as_deref())?;
        let blocks = std::env::var("COMM_CE_ADDS_BLOCKS").ok();
        let _ =
            super::ce_adds::MOST_BLOCKS.set(super::adds_policy::adds_blocks(blocks.as_deref())?);
        let adds = match windows.ce_reduce && at_arrival {
            // The lowest priority by default, as the compute stream's.
            true => Some(super::device::adds_stream(
                &ctx,
                std::env::var("COMM_CE_ADDS_PRIORITY").ok().as_deref(),
            )?),
            false => None,
        };
        let beside = match windows.ce_reduce {
            true => Some(super::device::comm_stream(&ctx)?),
            false => None,
        };
        let lane = std::env::var("COMM_CE_GATHER_LANE").ok();
        let on = windows.ce && windows.ce_reduce;
        let gather_lane =
            super::ce_lane::GatherLane::new(on, lane.as_deref(), &ctx, env.world_size)?;
        Ok(Self {
            rank: env.rank,
            world: env.world_size,
            device,
            compute,
            stream,
            raw,
            opts,
            seq: AtomicU64::new(0),
            watchdog,
            timeline: Mutex::new(None),
            launch_identity: std::env::var("COMM_NCCL_LAUNCH_IDENTITY").is_ok_and(|v| v == "1"),
            windows,
            ce_streams,
            ce_one_stream,
            reduces: Default::default(),
            adds,
            beside,
            gather_lane,
        })
    }

    /// The candle device this rank's tensors must live on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    pub(super) fn check_cuda(&self, op: &'static str, t: &Tensor) -> Result<()> {
        check_buffer(op, self.rank, t)?;
        if !t.device().same_device(&self.device) {
            return Err(CommError::invalid(
                op,
                self.rank,
                format!(
                    "tensor is on {:?}, this rank's NCCL device is {:?}",
                    t.device().location(),
                    self.device.location()
                ),
            ));
        }
        Ok(())
    }

    /// Queue point: the communication stream waits for the compute stream.
    pub(super) fn before(&self, stream: &CudaStream) -> Result<()> {
        let ev = self
            .compute
            .record_event(None)
            .map_err(drv("cuEventRecord"))?;
        stream.wait(&ev).map_err(drv(
            "cuStreamWaitEvent (communication stream after compute)",
        ))
    }

    /// Queues one collective writing `dst` (reading `src`, or `dst` itself): the
    /// communication stream waits for compute, the host call runs under the watchdog's
    /// eye (NCCL can block there connecting to a peer that is gone), completion is
    /// recorded and handed back as a [`Work`].
    pub(super) fn launch(
        &self,
        op: &'static str,
        call: Call,
        dst: &Tensor,
        src: Option<&Tensor>,
    ) -> Result<Work> {
        self.launch_all(op, &[(call, dst, src)])
    }

    /// [`Self::launch_on`] the communication stream.
    pub(super) fn launch_all(
        &self,
        op: &'static str,
        calls: &[(Call, &Tensor, Option<&Tensor>)],
    ) -> Result<Work> {
        self.launch_on(op, calls, &self.stream)
    }

    /// [`Self::launch`] for several calls, on `stream` (the communication stream, or the
    /// one beside it: [`crate::Deferred::beside`]): more than one go out as one NCCL group
    /// (one launch, one completion event recorded after `ncclGroupEnd`; cudarc's per-buffer
    /// events inside the group come before the launch, so only this event orders later
    /// work).
    pub(super) fn launch_on(
        &self,
        op: &'static str,
        calls: &[(Call, &Tensor, Option<&Tensor>)],
        stream: &CudaStream,
    ) -> Result<Work> {
        if calls.is_empty() || self.identity(calls) {
            return Ok(Work::completed());
        }
        if let Some((windows, rest)) = self.ce_plan(calls)? {
            // One copy-engine gather a window, each keeping the whole launch's tensors.
            let keep: Vec<Tensor> = calls.iter().map(|c| c.1.clone()).collect();
            let mut works = (windows.iter())
                .map(|(span, parts)| {
                    self.launch_ce(op, *span, parts, keep.clone(), self.main_lane())
                })
                .collect::<Result<Vec<_>>>()?;
            if !rest.is_empty() {
                let rest: Vec<_> = rest.into_iter().map(|i| calls[i]).collect();
                works.push(self.launch_nccl(op, &rest, stream)?);
            }
            return Ok(match works.len() {
                1 => works.remove(0),
                _ => Work::all(works),
            });
        }
        self.launch_nccl(op, calls, stream)
    }

    /// [`Self::launch_on`]'s calls that NCCL takes.
    fn launch_nccl(
        &self,
        op: &'static str,
        calls: &[(Call, &Tensor, Option<&Tensor>)],
        stream: &CudaStream,
    ) -> Result<Work> {
        self.before(stream)?;
        let timing = self.log().is_some();
        let start = timing.then(|| EventLog::begin(stream)).transpose()?;
        self.watchdog
            .in_call(Some((op, self.seq.load(Ordering::Relaxed))));
        let grouped = calls.len() > 1;
        let mut r = match grouped {
            true => self.raw.check("ncclGroupStart", group_start()),
            false => Ok(()),
        };
        for &(call, dst, src) in calls {
            if r.is_err() {
                break;
            }
            let l = Launch {
                raw: &self.raw,
                stream,
                call,
            };
            r = match src {
                None => dst.inplace_op1(&l),
                Some(src) => dst.inplace_op2(src, &l),
            }
            .map_err(CommError::from);
        }
        if grouped {
            // Every started group is ended, also after a failed call inside it.
            let end = self.raw.check("ncclGroupEnd", group_end());
            r = r.and(end);
        }
        self.watchdog.in_call(None);
        r?;
        let bytes = |t: &Tensor| t.elem_count() * t.dtype().size_in_bytes();
        if let (Some(start), Some(log)) = (start, self.log().as_mut()) {
            let b = calls
                .iter()
                .map(|(_, d, s)| bytes(d).max(s.map(bytes).unwrap_or(0)))
                .sum();
            log.end(stream, op, b, start)?;
        }
        let keep = calls
            .iter()
            .flat_map(|&(_, d, s)| std::iter::once(d).chain(s))
            .cloned()
            .collect();
        self.after(op, keep, stream)
    }

    /// Whether every call leaves its buffers as they are: on one rank an all-reduce, a
    /// broadcast, and an in-place reduce-scatter or all-gather are the identity. NCCL
    /// enqueues nothing for them; skipping them also skips the stream hand-off and the
    /// completion event around each, which inside a CUDA graph are nodes of their own
    /// (ZeRO-1 makes two such calls per large parameter).
    fn identity(&self, calls: &[(Call, &Tensor, Option<&Tensor>)]) -> bool {
        let same = |c: &Call| {
            matches!(
                c,
                Call::AllReduce(_)
                    | Call::Broadcast(_)
                    | Call::ReduceScatterInPlace { .. }
                    | Call::AllGatherInPlace { .. }
            )
        };
        self.world == 1 && !self.launch_identity && calls.iter().all(|(c, _, _)| same(c))
    }

    /// In-place all-reduces of `bufs` as one launch (`name` and shape-check `code` say
    /// which call it was): every buffer is checked before any is agreed on or sent.
    pub(super) fn all_reduce_list(
        &self,
        name: &'static str,
        code: i64,
        bufs: &[&Tensor],
        op: ReduceOp,
    ) -> Result<Work> {
        for b in bufs {
            self.check_cuda(name, b)?;
        }
        for b in bufs {
            self.agree(name, code, b.elem_count(), b.dtype(), 0)?;
        }
        let op = self.op(op);
        let calls: Vec<_> = bufs
            .iter()
            .map(|&b| (Call::AllReduce(op), b, None))
            .collect();
        self.launch_all(name, &calls)
    }

    /// Records completion, registers it with the watchdog, returns the handle. Inside a
    /// CUDA graph capture the event is a graph node, recorded at each replay, not now: the
    /// watchdog watches the replay instead ([`Communicator::watch_queued`]).
    pub(super) fn after(
        &self,
        op: &'static str,
        keep: Vec<Tensor>,
        stream: &CudaStream,
    ) -> Result<Work> {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let event = Arc::new(stream.record_event(None).map_err(drv("cuEventRecord"))?);
        if !capturing(stream) {
            self.watchdog.push(Pending {
                seq,
                op,
                event: event.clone(),
                deadline: crate::deadline_after(self.opts.timeout),
            });
        }
        Ok(Work::new(Box::new(NcclWork {
            op,
            seq,
            rank: self.rank,
            event,
            compute: self.compute.clone(),
            raw: self.raw.clone(),
            timeout: self.opts.timeout,
            ordered: false,
            _keep: keep,
        })))
    }
}

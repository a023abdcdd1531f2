//! Collectives behind one trait, for data-parallel training.
//!
//! How to use:
//! 1. Get a communicator. In a launched job (`comm-launch`, torchrun, srun), call
//!    [`init_from_env`] with a [`Backend`]: it reads RANK/WORLD_SIZE/... (see [`DistEnv`]),
//!    meets the other ranks at MASTER_ADDR:MASTER_PORT ([`store`]) and builds the group.
//!    For tests and laptops, [`cpu_group`] makes an in-process group, one handle per rank
//!    (move each into its own thread).
//! 2. Call collectives on candle [`Tensor`]s (contiguous, possibly views of a larger
//!    buffer): [`Communicator::all_reduce`] works in place; `reduce_scatter` and
//!    `all_gather` write into an output tensor; `broadcast` in place; `barrier`.
//! 3. Each collective has an `_async` form returning a [`Work`]: on GPU the collective is
//!    queued on a communication stream; [`Work::wait`] makes the compute stream wait for it
//!    (the host does not block), [`Work::synchronize`] blocks the host.
//!
//! Failure: a rank that does not show up makes every rank fail within
//! [`CommOptions::timeout`], naming the missing ranks; NCCL errors carry NCCL's message.
//!
//! Layout: [`env`](mod@env) (who am I), [`store`] (rendezvous), [`cpu`] (in-process backend),
//! [`nccl`] (GPU backend; a stub that says so without the `cuda` feature),
//! [`launch`] (spawning ranks), [`validate`] (per-rank argument checks).

pub mod conformance;
pub mod cpu;
mod deferred;
pub mod env;
pub mod error;
mod host;
pub mod launch;
pub mod nccl;
pub mod proc;
mod reduce;
pub mod store;
pub mod timeline;
pub mod validate;
mod work;

pub use candle_core::Tensor;
pub use cpu::{cpu_group, CpuComm};
pub use deferred::Deferred;
pub use env::DistEnv;
pub use error::{CommError, Result};
pub use host::{with_cpu_bytes, with_cpu_bytes_mut};
pub use nccl::NcclComm;
pub use proc::ProcComm;
pub use timeline::{CollectiveSpan, Mark, Timeline};
pub use work::{PendingWork, Work};

use candle_core::{DType, Device};
use std::time::{Duration, Instant};

/// Reduction applied by all-reduce and reduce-scatter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceOp {
    Sum,
    /// Sum divided by the world size (NCCL's ncclAvg).
    Avg,
    Max,
    Min,
}

/// Who gathers into a gather buffer ([`Communicator::gather_buffer_by`]), where the backend
/// has a choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gatherer {
    /// The backend's default: with NCCL, this crate's copy-engine gathers where they are on
    /// (`COMM_CE_GATHER`), else NCCL.
    Default,
    /// NCCL itself: its symmetric kernels, or the copy engines where the communicator asked
    /// for its zero-CTA policy (at world 2 on one node: `nccl::NCCL_CE_WORLDS`), unless
    /// `COMM_CE_GATHER=1` asks for this crate's copy-engine gathers everywhere. ZeRO-1's
    /// parameter gathers take it.
    Nccl,
}

/// Knobs shared by the backends.
#[derive(Debug, Clone)]
pub struct CommOptions {
    /// How long a rank waits for the others (rendezvous, a collective) before failing.
    pub timeout: Duration,
    /// Check before every collective that all ranks pass the same op, dtype and sizes
    /// (costs one small extra collective on NCCL; the CPU backend always checks).
    pub check_shapes: bool,
}

impl Default for CommOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(300),
            check_shapes: false,
        }
    }
}

/// Longest `COMM_TIMEOUT_S` accepted: 7 days (604800 s).
pub const MAX_TIMEOUT: Duration = Duration::from_secs(7 * 24 * 3600);

/// Shortest `COMM_TIMEOUT_S` accepted: 0.1 s. Below it no collective, let alone a
/// rendezvous or NCCL's initialisation, could finish in time: every run would fail.
pub const MIN_TIMEOUT: Duration = Duration::from_millis(100);

impl CommOptions {
    /// Defaults overridden by `COMM_TIMEOUT_S` and `COMM_CHECK_SHAPES=1`.
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Same as [`CommOptions::from_env`] over any variable source (tests use a closure).
    /// `COMM_TIMEOUT_S` must be a number of seconds in [[`MIN_TIMEOUT`], [`MAX_TIMEOUT`]].
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let mut o = Self::default();
        if let Some(v) = get("COMM_TIMEOUT_S") {
            let (min, max) = (MIN_TIMEOUT.as_secs_f64(), MAX_TIMEOUT.as_secs_f64());
            let secs: f64 = v
                .trim()
                .parse()
                .ok()
                .filter(|s: &f64| *s >= min && *s <= max)
                .ok_or_else(|| CommError::Env {
                    name: "COMM_TIMEOUT_S".into(),
                    msg: format!("{v:?} is not a number of seconds from {min} to {max} (7 days)"),
                })?;
            o.timeout = Duration::from_secs_f64(secs);
        }
        o.check_shapes = get("COMM_CHECK_SHAPES").is_some_and(|v| v == "1");
        Ok(o)
    }
}

/// `timeout` from now; a timeout too large for the clock (`Duration::MAX`) means about a
/// century, never an overflow panic.
pub(crate) fn deadline_after(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout)
        .or_else(|| now.checked_add(Duration::from_secs(100 * 365 * 24 * 3600)))
        .unwrap_or(now)
}

/// The collectives every backend provides. Buffers are candle tensors on the backend's
/// device (CPU tensors for [`CpuComm`], CUDA tensors for [`NcclComm`]).
pub trait Communicator: Send + Sync {
    fn rank(&self) -> usize;
    fn world_size(&self) -> usize;
    /// "cpu" or "nccl".
    fn backend(&self) -> &'static str;

    /// In place: every rank ends with the reduction of all ranks' `buf`.
    fn all_reduce_async(&self, buf: &Tensor, op: ReduceOp) -> Result<Work>;
    /// `input` has world_size × `output` elements; rank r receives the reduction of
    /// chunk r of every rank's input.
    fn reduce_scatter_async(&self, input: &Tensor, output: &Tensor, op: ReduceOp) -> Result<Work>;
    /// `output` has world_size × `input` elements: rank r's input lands in chunk r.
    fn all_gather_async(&self, input: &Tensor, output: &Tensor) -> Result<Work>;
    /// In place: every rank ends with rank `root`'s `buf`.
    fn broadcast_async(&self, buf: &Tensor, root: usize) -> Result<Work>;
    /// Returns once every rank has called it (or fails on timeout).
    fn barrier(&self) -> Result<()>;

    /// Puts the work queued so far on the caller's compute stream under the watchdog:
    /// unfinished after the timeout, it fails the job as a hung collective would, naming
    /// `what`. A replayed CUDA graph's collectives are not seen one by one (they were
    /// captured, not launched), so the replay is watched as one. CPU backends finish their
    /// collectives on the host: nothing to do.
    fn watch_queued(&self, what: &'static str) -> Result<()> {
        let _ = what;
        Ok(())
    }

    /// Several in-place all-reduces queued as one launch, with one handle (PyTorch's
    /// `all_reduce_coalesced`; NCCL: one group, so one kernel launch and one completion
    /// event instead of one per buffer). Every rank passes the same list. The default
    /// checks every buffer, then queues them one after another.
    fn all_reduce_coalesced_async(&self, bufs: &[Tensor], op: ReduceOp) -> Result<Work> {
        for b in bufs {
            validate::check_buffer("all_reduce_coalesced", self.rank(), b)?;
        }
        let works = bufs
            .iter()
            .map(|b| self.all_reduce_async(b, op))
            .collect::<Result<Vec<_>>>()?;
        Ok(Work::all(works))
    }
    /// Several reduce-scatters, each (input, output) as in [`Self::reduce_scatter_async`],
    /// queued as one launch with one handle; the default checks every pair, then queues
    /// them one after another.
    fn reduce_scatter_coalesced_async(
        &self,
        pairs: &[(Tensor, Tensor)],
        op: ReduceOp,
    ) -> Result<Work> {
        for (input, output) in pairs {
            let (r, w) = (self.rank(), self.world_size());
            validate::check_pair("reduce_scatter_coalesced", r, w, output, input)?;
        }
        let works = pairs
            .iter()
            .map(|(i, o)| self.reduce_scatter_async(i, o, op))
            .collect::<Result<Vec<_>>>()?;
        Ok(Work::all(works))
    }

    /// [`Self::reduce_scatter_coalesced_async`] for a caller that waits for the handle late
    /// (ZeRO-1: after its backward): the reductions may run when it waits, on its compute
    /// stream. NCCL, where its copy-engine reduce-scatters are on (`nccl::ce_reduce`:
    /// `COMM_CE_REDUCE`; by default at worlds 2 and 4 on one node), moves the in-place bf16
    /// chunks between the ranks without SMs as they come and adds them at the wait. The
    /// default is the coalesced reduce-scatter.
    fn reduce_scatter_deferred_async(
        &self,
        pairs: &[(Tensor, Tensor)],
        op: ReduceOp,
    ) -> Result<Work> {
        self.reduce_scatter_coalesced_async(pairs, op)
    }

    /// [`Self::reduce_scatter_deferred_async`] with more ([`Deferred`]): the all-gather of
    /// each buffer after its sums (an all-reduce out of place: DDP's split all-reduce with
    /// its gathers in the backward, `ddp::split`), and the L2 norm of this rank's
    /// reduced chunks (the gradient norm from the shards). NCCL's copy-engine
    /// reduce-scatters queue the all-gathers on the communication stream as soon as the
    /// adds are in, and sum the squares in the adds, so that only waiting for the handle
    /// orders the compute stream after them. The default takes the norm when the handle is
    /// waited for, and with a gather waits for the reduce-scatter (the compute stream does)
    /// before it launches the all-gathers.
    fn reduce_scatter_deferred_with(
        &self,
        pairs: &[(Tensor, Tensor)],
        op: ReduceOp,
        with: &Deferred,
    ) -> Result<Work> {
        deferred::composed(self, pairs, op, with)
    }

    /// Whether [`Self::reduce_scatter_deferred_with`] of `pairs` takes [`Deferred::norm`]
    /// with the sums themselves, so that it may be asked for inside a CUDA graph capture
    /// (NCCL: where its copy engines reduce every pair). The default takes it from the
    /// outputs when the handle is waited for, by candle's reductions, which a CPU backend
    /// runs anywhere.
    fn norm_with_sums(&self, pairs: &[(Tensor, Tensor)]) -> bool {
        let _ = pairs;
        true
    }

    /// Several all-gathers, each (input, output) as in [`Self::all_gather_async`], queued
    /// as one launch with one handle (NCCL: one group); the default checks every pair,
    /// then queues them one after another.
    fn all_gather_coalesced_async(&self, pairs: &[(Tensor, Tensor)]) -> Result<Work> {
        for (input, output) in pairs {
            let (r, w) = (self.rank(), self.world_size());
            validate::check_pair("all_gather_coalesced", r, w, input, output)?;
        }
        let works = pairs
            .iter()
            .map(|(i, o)| self.all_gather_async(i, o))
            .collect::<Result<Vec<_>>>()?;
        Ok(Work::all(works))
    }

    /// Mixed-precision all-gathers (FSDP2's mixed precision, Megatron-Core's distributed
    /// optimizer): each pair's input, this rank's part in a wider dtype (f32 masters), is
    /// cast to its output's dtype (bf16) into this rank's chunk of the output, and the
    /// outputs are gathered in place as one launch. The default casts on the compute stream
    /// (candle's `to_dtype`) and gathers; NCCL casts on its communication stream, so that
    /// the casts overlap compute instead of queueing before it.
    fn all_gather_cast_coalesced_async(&self, pairs: &[(Tensor, Tensor)]) -> Result<Work> {
        all_gather_cast_on_compute(self, pairs)
    }

    /// A zeroed one-dimensional buffer of `len` elements on `device`, for all-gathers to
    /// write into in place. Every rank makes the same buffers in the same order (NCCL: a
    /// collective call). NCCL 2.28.7 or later allocates it and registers it as a
    /// symmetric window, so that it gathers into it with its symmetric kernels
    /// (`nccl::window`; `COMM_NCCL_WINDOWS=0` turns that off) or, at world 2 on one node,
    /// with the copy engines (`nccl::ce`; `COMM_CE_GATHER=0` or `1`); the default is
    /// `Tensor::zeros`.
    fn gather_buffer(&self, len: usize, dtype: DType, device: &Device) -> Result<Tensor> {
        self.gather_buffer_by(len, dtype, device, Gatherer::Default)
    }

    /// [`Self::gather_buffer`], gathered into by `by` where the backend has a choice (NCCL:
    /// [`Gatherer`]); the default ignores it. A backend implements this one.
    fn gather_buffer_by(
        &self,
        len: usize,
        dtype: DType,
        device: &Device,
        by: Gatherer,
    ) -> Result<Tensor> {
        let _ = by;
        Ok(Tensor::zeros(len, dtype, device)?)
    }

    fn all_reduce(&self, buf: &Tensor, op: ReduceOp) -> Result<()> {
        self.all_reduce_async(buf, op)?.wait()
    }
    fn reduce_scatter(&self, input: &Tensor, output: &Tensor, op: ReduceOp) -> Result<()> {
        self.reduce_scatter_async(input, output, op)?.wait()
    }
    fn all_gather(&self, input: &Tensor, output: &Tensor) -> Result<()> {
        self.all_gather_async(input, output)?.wait()
    }
    fn broadcast(&self, buf: &Tensor, root: usize) -> Result<()> {
        self.broadcast_async(buf, root)?.wait()
    }
}

/// [`Communicator::all_gather_cast_coalesced_async`] with the casts on the compute stream
/// (candle's `to_dtype`), then the gathers as one launch: the trait's default, NCCL's for
/// the pairs it does not cast itself, and what FSDP's `FSDP_CAST=compute` measures.
pub fn all_gather_cast_on_compute<C: Communicator + ?Sized>(
    c: &C,
    pairs: &[(Tensor, Tensor)],
) -> Result<Work> {
    let sends = pairs
        .iter()
        .map(|(i, o)| Ok((i.to_dtype(o.dtype())?, o.clone())))
        .collect::<Result<Vec<_>>>()?;
    c.all_gather_coalesced_async(&sends)
}

/// Which backend [`init_from_env`] builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// One GPU per process, NCCL: the engine on GPUs and across nodes.
    Nccl,
    /// One CPU process per rank, a ring over TCP ([`ProcComm`]): the Gloo of this project,
    /// for laptops, CI and debugging data parallelism without GPUs.
    Cpu,
}

impl Backend {
    /// The backend a run takes when none is named: NCCL where this binary was built with
    /// CUDA and a GPU is visible, else the CPU; and why, as a line for the user (`train`
    /// and `bench` print it).
    pub fn auto() -> (Backend, String) {
        match nccl::gpu_count() {
            Ok(n) if n > 0 => (Backend::Nccl, format!("cuda ({n} GPU(s) visible)")),
            Ok(_) => (Backend::Cpu, "cpu (no GPU visible)".into()),
            Err(CommError::Unavailable { .. }) => (
                Backend::Cpu,
                "cpu (built without CUDA: for the GPU, `cargo xtask toolchain`, then build \
                 with --features cuda)"
                    .into(),
            ),
            Err(e) => (Backend::Cpu, format!("cpu (no usable GPU: {e})")),
        }
    }
}

/// Builds this process's communicator from the launcher's environment. Returns the
/// environment too (the local rank picks the GPU).
pub fn init_from_env(
    backend: Backend,
    opts: CommOptions,
) -> Result<(DistEnv, Box<dyn Communicator>)> {
    let env = DistEnv::from_env()?;
    let comm: Box<dyn Communicator> = match backend {
        Backend::Nccl => Box::new(NcclComm::new(&env, env.local_rank, opts)?),
        Backend::Cpu => Box::new(ProcComm::new(&env, opts)?),
    };
    Ok((env, comm))
}

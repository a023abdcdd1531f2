//! The multi-process CPU backend (the Gloo of this project): one process per rank, ranks
//! in a ring of TCP connections (loopback within a host), every collective of
//! [`Communicator`] as a pipelined ring algorithm (`plan`, `ring`).
//!
//! Setup: each rank listens on a free port, meets the others through the same TCP store
//! as NCCL ([`crate::store::rendezvous_addrs`], torchrun / Slurm / comm-launch environment),
//! connects to the next rank and accepts the previous one. Each collective first passes
//! its signature (op, count, dtype, root) to the next rank, which compares it with its own:
//! mismatched calls fail on every rank naming both. A failure breaks the communicator: the
//! rank tells the next one why (ABORT, forwarded around the ring) and closes its links, so
//! every rank fails within `COMM_TIMEOUT_S`, naming the rank that died, hung or disagreed.
//! Collectives run to completion before they return (their `Work` is already complete).

mod connect;
mod plan;
mod recv;
mod ring;
mod wire;

use crate::error::{CommError, Result};
use crate::host::{read_bytes, write_bytes};
use crate::reduce::Aligned;
use crate::validate::{check_cpu_buffer, check_pair, check_root};
use crate::{CommOptions, Communicator, DistEnv, ReduceOp, Work};
use candle_core::{DType, Tensor};
use plan::Plan;
use ring::{Call, Failure, Links};
use std::sync::Mutex;
use std::time::Duration;

/// How long a failing rank tries to tell the next one why.
const ABORT_WITHIN: Duration = Duration::from_millis(500);

struct Inner {
    links: Option<Links>,
    seq: u64,
    broken: Option<String>,
}

/// One rank's handle on a group of processes (`backend()` is "cpu").
pub struct ProcComm {
    rank: usize,
    world: usize,
    opts: CommOptions,
    inner: Mutex<Inner>,
}

impl ProcComm {
    /// Meets the other ranks (rendezvous at MASTER_ADDR:MASTER_PORT) and connects the ring.
    pub fn new(env: &DistEnv, opts: CommOptions) -> Result<Self> {
        let links = connect::ring(env, opts.timeout)?;
        Ok(Self {
            rank: env.rank,
            world: env.world_size,
            opts,
            inner: Mutex::new(Inner {
                links,
                seq: 0,
                broken: None,
            }),
        })
    }

    /// Runs one collective's plan on `buf` (this rank's working bytes).
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        op: &'static str,
        count: usize,
        dtype: DType,
        root: usize,
        reduce: ReduceOp,
        buf: &mut [u8],
        plan: &Plan,
    ) -> Result<()> {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(reason) = &g.broken {
            return Err(CommError::Broken {
                rank: self.rank,
                reason: format!("{op} cannot run: {reason}"),
            });
        }
        g.seq += 1;
        let seq = g.seq;
        let Some(links) = g.links.as_mut() else {
            return Ok(()); // one rank: nothing to exchange
        };
        let sig = format!("{op} of {count} {dtype:?} (root {root})");
        let call = Call {
            seq,
            op,
            sig: &sig,
            dtype,
            reduce,
            timeout: self.opts.timeout,
        };
        let Err((failure, clean)) = ring::run(links, buf, plan, &call) else {
            return Ok(());
        };
        let (mismatch, text) = match &failure {
            Failure::Aborted { mismatch, text } | Failure::Here { mismatch, text, .. } => {
                (*mismatch, text.clone())
            }
        };
        if clean {
            wire::send_abort(
                &mut links.next,
                seq,
                &wire::abort_text(mismatch, &text),
                ABORT_WITHIN,
            );
        }
        let _ = links.next.shutdown(std::net::Shutdown::Both);
        let _ = links.prev.shutdown(std::net::Shutdown::Both);
        g.broken = Some(format!("{op} #{seq} failed: {text}"));
        Err(match failure {
            _ if mismatch => CommError::Mismatch { op, detail: text },
            Failure::Here {
                timed_out: true,
                missing,
                ..
            } => CommError::Timeout {
                what: format!("{op} #{seq} ({text})"),
                rank: self.rank,
                timeout: self.opts.timeout,
                missing,
            },
            _ => CommError::Broken {
                rank: self.rank,
                reason: format!("{op} #{seq} failed: {text}"),
            },
        })
    }
}

impl Communicator for ProcComm {
    fn rank(&self) -> usize {
        self.rank
    }
    fn world_size(&self) -> usize {
        self.world
    }
    fn backend(&self) -> &'static str {
        "cpu"
    }

    fn all_reduce_async(&self, buf: &Tensor, op: ReduceOp) -> Result<Work> {
        const OP: &str = "all_reduce";
        check_cpu_buffer(OP, self.rank, buf)?;
        let (count, dtype) = (buf.elem_count(), buf.dtype());
        let plan = plan::all_reduce(count, dtype.size_in_bytes(), self.world, self.rank);
        write_bytes(OP, self.rank, buf, |b| {
            self.run(OP, count, dtype, 0, op, b, &plan)
        })?;
        Ok(Work::completed())
    }

    fn reduce_scatter_async(&self, input: &Tensor, output: &Tensor, op: ReduceOp) -> Result<Work> {
        const OP: &str = "reduce_scatter";
        check_pair(OP, self.rank, self.world, output, input)?;
        check_cpu_buffer(OP, self.rank, input)?;
        let (m, dtype) = (output.elem_count(), input.dtype());
        let esz = dtype.size_in_bytes();
        let mut work = Aligned::new(m * self.world * esz);
        read_bytes(OP, self.rank, input, |b| {
            work.bytes_mut().copy_from_slice(b);
            Ok(())
        })?;
        let plan = plan::reduce_scatter(m, esz, self.world, self.rank);
        self.run(OP, m * self.world, dtype, 0, op, work.bytes_mut(), &plan)?;
        let mine = &work.bytes()[self.rank * m * esz..(self.rank + 1) * m * esz];
        write_bytes(OP, self.rank, output, |b| {
            b.copy_from_slice(mine);
            Ok(())
        })?;
        Ok(Work::completed())
    }

    fn all_gather_async(&self, input: &Tensor, output: &Tensor) -> Result<Work> {
        const OP: &str = "all_gather";
        check_pair(OP, self.rank, self.world, input, output)?;
        check_cpu_buffer(OP, self.rank, input)?;
        let (m, dtype) = (input.elem_count(), input.dtype());
        let esz = dtype.size_in_bytes();
        let mut work = Aligned::new(m * self.world * esz);
        let mine = self.rank * m * esz..(self.rank + 1) * m * esz;
        read_bytes(OP, self.rank, input, |b| {
            work.bytes_mut()[mine].copy_from_slice(b);
            Ok(())
        })?;
        let plan = plan::all_gather(m, esz, self.world, self.rank);
        self.run(OP, m, dtype, 0, ReduceOp::Sum, work.bytes_mut(), &plan)?;
        write_bytes(OP, self.rank, output, |b| {
            b.copy_from_slice(work.bytes());
            Ok(())
        })?;
        Ok(Work::completed())
    }

    fn broadcast_async(&self, buf: &Tensor, root: usize) -> Result<Work> {
        const OP: &str = "broadcast";
        check_root(OP, self.rank, self.world, root)?;
        check_cpu_buffer(OP, self.rank, buf)?;
        let (count, dtype) = (buf.elem_count(), buf.dtype());
        let len = count * dtype.size_in_bytes();
        let plan = plan::broadcast(len, self.world, self.rank, root);
        // The root's plan only sends: its buffer is locked for writing but never written.
        write_bytes(OP, self.rank, buf, |b| {
            self.run(OP, count, dtype, root, ReduceOp::Sum, b, &plan)
        })?;
        Ok(Work::completed())
    }

    fn barrier(&self) -> Result<()> {
        let plan = plan::all_reduce(0, 4, self.world, self.rank);
        self.run("barrier", 0, DType::F32, 0, ReduceOp::Sum, &mut [], &plan)
    }
}

//! In-process CPU backend: one thread per rank, same semantics as NCCL, at memory speed.
//!
//! Ranks meet in a shared slot table (a generation counter under a mutex and condvar) where
//! each publishes a pointer to its buffer, in place, without copying it. All-reduce is a
//! reduce-scatter and an all-gather in one pass: rank r reduces chunk r of every rank's
//! buffer (in rank order, in the dtype's own arithmetic: f32 for f32, bf16 and f16, f64
//! for f64) and writes the result into chunk r of every rank's buffer. The ranks reduce
//! their chunks in parallel, each element is reduced exactly once, and every rank ends
//! with identical bits. A second meeting ("leave") keeps every buffer alive and locked
//! until all ranks are done with it.
//!
//! All ranks' signatures (op, count, dtype, root) are compared before any buffer is read:
//! a mismatch fails on every rank naming each rank's call. A rank that does not arrive
//! within the timeout breaks the group: every waiting rank fails naming the missing ranks.
//! A rank whose handle is dropped (it returned, failed, or its thread panicked) breaks the
//! group at once: collectives it had not joined fail on every other rank, naming it.
//! Rounds it completed stay completed, so ranks still returning from them succeed.

use crate::error::{CommError, Result};
use crate::host::{read_bytes, write_bytes, RawBuf};
use crate::reduce::{reduce_across, Aligned};
use crate::validate::{check_cpu_buffer, check_pair, check_root};
use crate::{CommOptions, Communicator, ReduceOp, Work};
use candle_core::{DType, Tensor};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// What each rank says it is doing; all ranks must agree.
#[derive(Debug, Clone, PartialEq)]
struct Signature {
    op: &'static str,
    count: usize,
    dtype: DType,
    root: usize,
}

struct Entry {
    sig: Signature,
    buf: RawBuf,
}

#[derive(Default)]
struct State {
    generation: u64,
    slots: Vec<Option<Entry>>,
    arrived: usize,
    last: Option<Arc<Vec<Entry>>>,
    broken: Option<String>,
    /// The second meeting of a collective: ranks done with the others' buffers.
    left: usize,
    left_generation: u64,
    /// A rank's thread panicked (possibly mid-collective).
    panicked: Option<usize>,
}

struct Shared {
    world: usize,
    state: Mutex<State>,
    cv: Condvar,
}

/// One rank's handle on an in-process group. `Send`: move it into the rank's thread.
pub struct CpuComm {
    rank: usize,
    shared: Arc<Shared>,
    opts: CommOptions,
}

/// Makes a group of `world` ranks; element r is rank r's handle.
pub fn cpu_group(world: usize, opts: CommOptions) -> Result<Vec<CpuComm>> {
    if world == 0 {
        return Err(CommError::invalid(
            "cpu_group",
            0,
            "world size must be at least 1",
        ));
    }
    let shared = Arc::new(Shared {
        world,
        state: Mutex::new(State {
            slots: (0..world).map(|_| None).collect(),
            ..State::default()
        }),
        cv: Condvar::new(),
    });
    Ok((0..world)
        .map(|rank| CpuComm {
            rank,
            shared: shared.clone(),
            opts: opts.clone(),
        })
        .collect())
}

/// Rank r's share of `count` elements; the shares tile 0..count exactly. Boundaries are
/// multiples of 16 elements (a cache line of f32) so no two ranks write one line.
pub(crate) fn chunk(count: usize, world: usize, r: usize) -> std::ops::Range<usize> {
    let at = |k: usize| {
        if k == world {
            count
        } else {
            (k * count / world) & !15
        }
    };
    at(r)..at(r + 1)
}

impl CpuComm {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Deposits `entry`, waits for every rank's, returns all of them in rank order.
    fn exchange(&self, entry: Entry) -> Result<Arc<Vec<Entry>>> {
        let sh = &*self.shared;
        let what = entry.sig.op;
        let mut st = self.lock();
        if let Some(reason) = &st.broken {
            return Err(self.broken(what, reason));
        }
        st.slots[self.rank] = Some(entry);
        st.arrived += 1;
        if st.arrived == sh.world {
            let all: Vec<Entry> = st
                .slots
                .iter_mut()
                .map(|s| s.take().expect("every slot is filled"))
                .collect();
            let all = Arc::new(all);
            st.last = Some(all.clone());
            st.arrived = 0;
            st.generation += 1;
            sh.cv.notify_all();
            return Ok(all);
        }
        let gen = st.generation;
        let (mut st, _) = sh
            .cv
            .wait_timeout_while(st, self.opts.timeout, |s| {
                s.generation == gen && s.broken.is_none()
            })
            .unwrap_or_else(|p| p.into_inner());
        if st.generation != gen {
            return Ok(st
                .last
                .clone()
                .expect("a finished round leaves its entries"));
        }
        if let Some(reason) = &st.broken {
            return Err(self.broken(what, reason));
        }
        let missing: Vec<usize> = (0..sh.world).filter(|&r| st.slots[r].is_none()).collect();
        st.broken = Some(format!(
            "rank {} gave up on {what} after {:?}; ranks {missing:?} never arrived",
            self.rank, self.opts.timeout
        ));
        sh.cv.notify_all();
        Err(CommError::Timeout {
            what: what.to_string(),
            rank: self.rank,
            timeout: self.opts.timeout,
            missing,
        })
    }

    /// The second meeting: returns once every rank is done reading and writing the
    /// buffers published in this round. No timeout: the ranks are all past the first
    /// meeting and only copy or reduce memory; a panicked rank ends the wait.
    fn leave(&self, what: &'static str) -> Result<()> {
        let sh = &*self.shared;
        let mut st = self.lock();
        st.left += 1;
        if st.left == sh.world {
            st.left = 0;
            st.left_generation += 1;
            sh.cv.notify_all();
            return Ok(());
        }
        let gen = st.left_generation;
        let st = sh
            .cv
            .wait_while(st, |s| s.left_generation == gen && s.panicked.is_none())
            .unwrap_or_else(|p| p.into_inner());
        match st.panicked {
            Some(r) if st.left_generation == gen => {
                Err(self.broken(what, &format!("rank {r}'s thread panicked during it")))
            }
            _ => Ok(()),
        }
    }

    fn broken(&self, what: &str, reason: &str) -> CommError {
        CommError::Broken {
            rank: self.rank,
            reason: format!("{what} cannot complete: {reason}"),
        }
    }

    /// Exchange, then check that every rank called the same thing.
    fn exchange_checked(&self, sig: Signature, buf: RawBuf) -> Result<Arc<Vec<Entry>>> {
        let op = sig.op;
        let all = self.exchange(Entry { sig, buf })?;
        if all.iter().any(|e| e.sig != all[0].sig) {
            let detail = all
                .iter()
                .enumerate()
                .map(|(r, e)| {
                    format!(
                        "rank {r}: {} of {} {:?} (root {})",
                        e.sig.op, e.sig.count, e.sig.dtype, e.sig.root
                    )
                })
                .collect::<Vec<_>>()
                .join("; ");
            return Err(CommError::Mismatch { op, detail });
        }
        Ok(all)
    }

    fn sig(&self, op: &'static str, t: &Tensor, root: usize) -> Signature {
        Signature {
            op,
            count: t.elem_count(),
            dtype: t.dtype(),
            root,
        }
    }
}

impl Drop for CpuComm {
    /// A leaving rank breaks the group, so the others do not wait for it until the timeout.
    /// It can only leave between collectives (they borrow the handle), so every round it
    /// joined is complete and unaffected, unless its thread panicked inside one.
    fn drop(&mut self) {
        let sh = &*self.shared;
        let mut st = sh.state.lock().unwrap_or_else(|p| p.into_inner());
        let panicking = std::thread::panicking();
        if panicking {
            st.panicked = Some(self.rank);
        }
        if st.broken.is_none() {
            let how = if panicking {
                "its thread panicked"
            } else {
                "its handle was dropped"
            };
            st.broken = Some(format!("rank {} left the group ({how})", self.rank));
        }
        sh.cv.notify_all();
    }
}

impl Communicator for CpuComm {
    fn rank(&self) -> usize {
        self.rank
    }
    fn world_size(&self) -> usize {
        self.shared.world
    }
    fn backend(&self) -> &'static str {
        "cpu"
    }

    fn all_reduce_async(&self, buf: &Tensor, op: ReduceOp) -> Result<Work> {
        const OP: &str = "all_reduce";
        check_cpu_buffer(OP, self.rank, buf)?;
        let (count, dtype, world) = (buf.elem_count(), buf.dtype(), self.shared.world);
        let sig = self.sig(OP, buf, 0);
        write_bytes(OP, self.rank, buf, |bytes| {
            let all = self.exchange_checked(sig, RawBuf::of_mut(bytes))?;
            let ptrs: Vec<usize> = all.iter().map(|e| e.buf.ptr).collect();
            // SAFETY: every rank's buffer holds `count` elements (signatures checked) and
            // stays locked until `leave`; only this rank touches chunk `rank` of any of them.
            unsafe {
                reduce_across(
                    dtype,
                    &ptrs,
                    &ptrs,
                    chunk(count, world, self.rank),
                    op,
                    world,
                )
            };
            drop(all);
            self.leave(OP)
        })?;
        Ok(Work::completed())
    }

    fn reduce_scatter_async(&self, input: &Tensor, output: &Tensor, op: ReduceOp) -> Result<Work> {
        const OP: &str = "reduce_scatter";
        let (rank, world) = (self.rank, self.shared.world);
        check_pair(OP, rank, world, output, input)?;
        check_cpu_buffer(OP, self.rank, input)?;
        let (m, dtype) = (output.elem_count(), input.dtype());
        let esz = dtype.size_in_bytes();
        let sig = self.sig(OP, input, 0);
        let mine = read_bytes(OP, rank, input, |bytes| {
            let all = self.exchange_checked(sig, RawBuf::of(bytes))?;
            let srcs: Vec<usize> = all.iter().map(|e| e.buf.ptr + rank * m * esz).collect();
            let mut out = Aligned::new(m * esz);
            let dst = [out.bytes_mut().as_mut_ptr() as usize];
            // SAFETY: every input holds world × m elements and stays locked until `leave`;
            // inputs are only read; `out` is this rank's own.
            unsafe { reduce_across(dtype, &srcs, &dst, 0..m, op, world) };
            drop(all);
            self.leave(OP)?;
            Ok(out)
        })?;
        write_bytes(OP, rank, output, |b| {
            b.copy_from_slice(mine.bytes());
            Ok(())
        })?;
        Ok(Work::completed())
    }

    fn all_gather_async(&self, input: &Tensor, output: &Tensor) -> Result<Work> {
        const OP: &str = "all_gather";
        let rank = self.rank;
        check_pair(OP, rank, self.shared.world, input, output)?;
        check_cpu_buffer(OP, self.rank, input)?;
        let sig = self.sig(OP, input, 0);
        let gathered = read_bytes(OP, rank, input, |bytes| {
            let all = self.exchange_checked(sig, RawBuf::of(bytes))?;
            let mut out = Vec::with_capacity(bytes.len() * all.len());
            for e in all.iter() {
                // SAFETY: each rank's input holds `len` bytes, locked until `leave`.
                out.extend_from_slice(unsafe {
                    std::slice::from_raw_parts(e.buf.ptr as *const u8, e.buf.len)
                });
            }
            drop(all);
            self.leave(OP)?;
            Ok(out)
        })?;
        write_bytes(OP, rank, output, |b| {
            b.copy_from_slice(&gathered);
            Ok(())
        })?;
        Ok(Work::completed())
    }

    fn broadcast_async(&self, buf: &Tensor, root: usize) -> Result<Work> {
        const OP: &str = "broadcast";
        check_root(OP, self.rank, self.shared.world, root)?;
        check_cpu_buffer(OP, self.rank, buf)?;
        let sig = self.sig(OP, buf, root);
        if self.rank == root {
            read_bytes(OP, self.rank, buf, |bytes| {
                drop(self.exchange_checked(sig, RawBuf::of(bytes))?);
                self.leave(OP)
            })?;
        } else {
            write_bytes(OP, self.rank, buf, |bytes| {
                let all = self.exchange_checked(sig, RawBuf::empty())?;
                let src = all[root].buf;
                // SAFETY: the root's buffer holds as many bytes (signatures checked) and
                // stays locked until `leave`.
                bytes.copy_from_slice(unsafe {
                    std::slice::from_raw_parts(src.ptr as *const u8, src.len)
                });
                drop(all);
                self.leave(OP)
            })?;
        }
        Ok(Work::completed())
    }

    fn barrier(&self) -> Result<()> {
        let sig = Signature {
            op: "barrier",
            count: 0,
            dtype: DType::F32,
            root: 0,
        };
        self.exchange_checked(sig, RawBuf::empty()).map(|_| ())
    }
}

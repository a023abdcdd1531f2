//! In-process CPU backend: one thread per rank, same semantics as NCCL.
//!
//! Ranks meet in a shared slot table (a generation counter under a mutex and condvar).
//! All-reduce is a reduce-scatter followed by an all-gather: each rank reduces its own
//! chunk of every rank's contribution, then all chunks are shared, so each element is
//! reduced exactly once and every rank ends with identical bits. Values are reduced in
//! f64 and rounded once to the buffer's dtype. A rank that does not arrive within the
//! timeout breaks the group: every waiting rank fails naming the missing ranks. A rank
//! whose handle is dropped (it returned, failed, or its thread panicked) breaks the group
//! at once: collectives it had not joined fail on every other rank, naming it. Rounds it
//! completed stay completed, so ranks still returning from them succeed.

use crate::error::{CommError, Result};
use crate::validate::{check_buffer, check_pair, check_root};
use crate::{CommOptions, Communicator, ReduceOp, Work};
use candle_core::{CpuStorage, DType, InplaceOp1, Layout, Tensor};
use std::sync::{Arc, Condvar, Mutex};

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
    data: Vec<f64>,
}

#[derive(Default)]
struct State {
    generation: u64,
    slots: Vec<Option<Entry>>,
    arrived: usize,
    last: Option<Arc<Vec<Entry>>>,
    broken: Option<String>,
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

/// Rank r's share of `count` elements; the shares tile 0..count exactly.
fn range(count: usize, world: usize, r: usize) -> std::ops::Range<usize> {
    r * count / world..(r + 1) * count / world
}

impl CpuComm {
    /// Deposits `entry`, waits for every rank's, returns all of them in rank order.
    fn exchange(&self, entry: Entry) -> Result<Arc<Vec<Entry>>> {
        let sh = &*self.shared;
        let what = entry.sig.op;
        let mut st = sh.state.lock().unwrap_or_else(|p| p.into_inner());
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

    fn broken(&self, what: &str, reason: &str) -> CommError {
        CommError::Broken {
            rank: self.rank,
            reason: format!("{what} cannot complete: {reason}"),
        }
    }

    /// Exchange, then check that every rank called the same thing.
    fn exchange_checked(&self, sig: Signature, data: Vec<f64>) -> Result<Arc<Vec<Entry>>> {
        let op = sig.op;
        let all = self.exchange(Entry { sig, data })?;
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

    fn check_cpu(&self, op: &'static str, t: &Tensor) -> Result<()> {
        check_buffer(op, self.rank, t)?;
        if !t.device().is_cpu() {
            return Err(CommError::invalid(
                op,
                self.rank,
                format!(
                    "the CPU backend needs CPU tensors, got {:?}",
                    t.device().location()
                ),
            ));
        }
        Ok(())
    }

    /// Reduce chunk `self.rank` of every entry.
    fn reduce_my_chunk(&self, all: &[Entry], count: usize, op: ReduceOp) -> Vec<f64> {
        let r = range(count, self.shared.world, self.rank);
        let mut acc = all[0].data[r.clone()].to_vec();
        for e in &all[1..] {
            for (a, &b) in acc.iter_mut().zip(&e.data[r.clone()]) {
                *a = match op {
                    ReduceOp::Sum | ReduceOp::Avg => *a + b,
                    ReduceOp::Max => a.max(b),
                    ReduceOp::Min => a.min(b),
                };
            }
        }
        if op == ReduceOp::Avg {
            let n = self.shared.world as f64;
            acc.iter_mut().for_each(|a| *a /= n);
        }
        acc
    }
}

fn read(t: &Tensor) -> Result<Vec<f64>> {
    Ok(t.flatten_all()?.to_dtype(DType::F64)?.to_vec1::<f64>()?)
}

/// Writes host values into a (contiguous) tensor's storage, in place.
struct HostWrite<'a>(&'a [f64]);

impl InplaceOp1 for HostWrite<'_> {
    fn name(&self) -> &'static str {
        "host-write"
    }
    fn cpu_fwd(&self, storage: &mut CpuStorage, layout: &Layout) -> candle_core::Result<()> {
        let start = layout.start_offset();
        let n = self.0.len();
        macro_rules! put {
            ($v:expr, $conv:expr) => {
                for (d, &s) in $v[start..start + n].iter_mut().zip(self.0) {
                    *d = $conv(s);
                }
            };
        }
        match storage {
            CpuStorage::F32(v) => put!(v, |s: f64| s as f32),
            CpuStorage::F64(v) => put!(v, |s: f64| s),
            CpuStorage::BF16(v) => put!(v, half::bf16::from_f64),
            CpuStorage::F16(v) => put!(v, half::f16::from_f64),
            other => candle_core::bail!(
                "host-write: unsupported dtype {:?}",
                candle_core::backend::BackendStorage::dtype(other)
            ),
        }
        Ok(())
    }
}

fn write(t: &Tensor, data: &[f64]) -> Result<()> {
    Ok(t.inplace_op1(&HostWrite(data))?)
}

impl Drop for CpuComm {
    /// A leaving rank breaks the group, so the others do not wait for it until the timeout.
    /// It can only leave between collectives (they borrow the handle), so every round it
    /// joined is complete and unaffected.
    fn drop(&mut self) {
        let sh = &*self.shared;
        let mut st = sh.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.broken.is_none() {
            let how = if std::thread::panicking() {
                "its thread panicked"
            } else {
                "its handle was dropped"
            };
            st.broken = Some(format!("rank {} left the group ({how})", self.rank));
            sh.cv.notify_all();
        }
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
        self.check_cpu("all_reduce", buf)?;
        let count = buf.elem_count();
        let all = self.exchange_checked(self.sig("all_reduce", buf, 0), read(buf)?)?;
        let mine = self.reduce_my_chunk(&all, count, op);
        drop(all);
        let sig = Signature {
            op: "all_reduce/gather",
            count,
            dtype: buf.dtype(),
            root: 0,
        };
        let chunks = self.exchange_checked(sig, mine)?;
        let out: Vec<f64> = chunks.iter().flat_map(|e| e.data.iter().copied()).collect();
        write(buf, &out)?;
        Ok(Work::completed())
    }

    fn reduce_scatter_async(&self, input: &Tensor, output: &Tensor, op: ReduceOp) -> Result<Work> {
        check_pair(
            "reduce_scatter",
            self.rank,
            self.shared.world,
            output,
            input,
        )?;
        self.check_cpu("reduce_scatter", input)?;
        let all = self.exchange_checked(self.sig("reduce_scatter", input, 0), read(input)?)?;
        let mine = self.reduce_my_chunk(&all, input.elem_count(), op);
        write(output, &mine)?;
        Ok(Work::completed())
    }

    fn all_gather_async(&self, input: &Tensor, output: &Tensor) -> Result<Work> {
        check_pair("all_gather", self.rank, self.shared.world, input, output)?;
        self.check_cpu("all_gather", input)?;
        let all = self.exchange_checked(self.sig("all_gather", input, 0), read(input)?)?;
        let out: Vec<f64> = all.iter().flat_map(|e| e.data.iter().copied()).collect();
        write(output, &out)?;
        Ok(Work::completed())
    }

    fn broadcast_async(&self, buf: &Tensor, root: usize) -> Result<Work> {
        check_root("broadcast", self.rank, self.shared.world, root)?;
        self.check_cpu("broadcast", buf)?;
        let data = if self.rank == root {
            read(buf)?
        } else {
            Vec::new()
        };
        let all = self.exchange_checked(self.sig("broadcast", buf, root), data)?;
        if self.rank != root {
            write(buf, &all[root].data)?;
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
        self.exchange_checked(sig, Vec::new()).map(|_| ())
    }
}

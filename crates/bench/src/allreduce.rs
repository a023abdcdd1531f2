//! The all-reduce sweep (nccl-tests' all_reduce_perf, the seeds'
//! distributed_communication_single_node): fp32 in place, sum, per message size; or, with
//! [`Op::ReduceScatter`], the deferred bf16 reduce-scatter that DDP and ZeRO-1 launch
//! during the backward (`super::scatter`).
//!
//! Per size: one checked collective (exact expected values), `warmup` untimed, `iters`
//! timed back to back (CUDA events on the compute stream, or the wall clock on CPU),
//! then a second checked one. Time is the slowest rank's mean, as nccl-tests
//! reports; busbw = algbw · 2(n−1)/n for an all-reduce, algbw · (n−1)/n for a
//! reduce-scatter.

use crate::budget::{self, Mem};
use crate::records::{busbw, AllReduceRecord};
use crate::timer::Timer;
use anyhow::{bail, Result};
use candle_core::{DType, Device, Tensor};
use comm::{Communicator, ReduceOp};

/// The seeds' sizes, in MiB (as the PyTorch anchor measures them): the GPU default.
pub const DEFAULT_SIZES_MIB: &[f64] = &[0.5, 1.0, 10.0, 50.0, 100.0, 500.0, 1024.0];
/// The CPU default: in-process ranks share the host's memory (about 5 × size × ranks),
/// so the sweep stops at 64 MiB (2.5 GiB on 8 ranks).
pub const DEFAULT_CPU_SIZES_MIB: &[f64] = &[0.5, 1.0, 10.0, 64.0];
/// The largest message `--sizes-mib` takes (1 TiB), whatever the memory.
const MAX_MIB: f64 = (1u64 << 20) as f64;

/// The message sizes in bytes: `--sizes-mib` or the backend's default.
pub fn sizes_bytes(spec: Option<&str>, gpu: bool) -> Result<Vec<usize>> {
    match spec {
        Some(s) => parse_sizes_mib(s),
        None => Ok(if gpu {
            DEFAULT_SIZES_MIB
        } else {
            DEFAULT_CPU_SIZES_MIB
        }
        .iter()
        .map(|m| (m * (1u64 << 20) as f64) as usize)
        .collect()),
    }
}

/// Before the sweep: two ranks or more (an all-reduce over one rank moves nothing: its
/// time would be a no-op's and its bandwidth a fiction), every message holds at least one
/// fp32 element per rank, and the largest fits in memory on the most ranks asked for
/// (`budget`, [`Op::copies`] of it a rank).
pub fn check_sizes(sizes: &[usize], ranks: &[usize], gpu: bool, op: Op) -> Result<()> {
    if let Some(one) = ranks.iter().find(|&&r| r < 2) {
        bail!("--ranks {one}: an all-reduce over one rank moves nothing, so there is no bandwidth to measure; give 2 or more ranks");
    }
    let most = ranks.iter().copied().max().unwrap_or(1);
    let (Some(&min), Some(&max)) = (sizes.iter().min(), sizes.iter().max()) else {
        bail!("--sizes-mib is empty");
    };
    if min / 4 < most {
        bail!("--sizes-mib: a {min}-byte message holds fewer fp32 elements than --ranks {most}");
    }
    let flags = format!(
        "--sizes-mib {} × --ranks {most}",
        max as f64 / (1u64 << 20) as f64
    );
    let mem = if gpu { Mem::Gpu } else { Mem::Host };
    budget::ensure(&flags, budget::collective(max, op.copies(), most, gpu), mem)
}

#[derive(Debug, Clone)]
pub struct SweepConfig {
    pub sizes_bytes: Vec<usize>,
    pub warmup: usize,
    pub iters: usize,
    pub op: Op,
}

/// The collective a sweep times.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Op {
    /// fp32, in place, sum: records `"bench":"allreduce"`.
    AllReduce,
    /// bf16, in place, average, deferred (`Communicator::reduce_scatter_deferred_with`:
    /// launched, then waited for), the message split into `buffers` buffers of one launch:
    /// records `"bench":"reduce-scatter"`.
    ReduceScatter { buffers: usize },
}

impl Op {
    /// About how many buffers of the message's size a rank holds at once: the all-reduce
    /// five (pattern, input, expected sum, comparison); the reduce-scatter six (the f32 pattern counts two, the
    /// inputs, the buffers timed in place, a checked run's copies, its comparison).
    pub fn copies(self) -> u64 {
        match self {
            Op::AllReduce => 5,
            Op::ReduceScatter { .. } => 6,
        }
    }
}

/// Rank r's input element i is (r+1)·((i mod 7)+1); the sum over n ranks is
/// n(n+1)/2·((i mod 7)+1): exact in fp32 for any size we run.
pub(crate) struct Pattern {
    pub(crate) base: Tensor,
}

impl Pattern {
    fn new(count: usize, device: &Device) -> Result<Self> {
        let host: Vec<f32> = (0..count).map(|i| ((i % 7) + 1) as f32).collect();
        Ok(Self {
            base: Tensor::from_vec(host, count, device)?,
        })
    }
    fn input(&self, rank: usize) -> Result<Tensor> {
        Ok(self.base.affine((rank + 1) as f64, 0.0)?)
    }
    /// Number of elements that differ from the expected sum.
    fn mismatches(&self, got: &Tensor, world: usize) -> Result<u64> {
        let want = self.base.affine((world * (world + 1) / 2) as f64, 0.0)?;
        Ok(got
            .ne(&want)?
            .to_dtype(DType::F32)?
            .sum_all()?
            .to_scalar::<f32>()? as u64)
    }
}

fn checked_once(comm: &dyn Communicator, p: &Pattern) -> Result<(Tensor, u64)> {
    let buf = p.input(comm.rank())?;
    comm.all_reduce(&buf, ReduceOp::Sum)?;
    let bad = p.mismatches(&buf, comm.world_size())?;
    Ok((buf, bad))
}

/// One size's timed collective: the all-reduce's buffer (the first checked run's), or the
/// reduce-scatter's buffers.
enum Timed {
    AllReduce(Tensor),
    ReduceScatter(crate::scatter::Parts),
}

impl Timed {
    /// The first checked run (its wrong elements) and what the timed runs use.
    fn first(op: Op, comm: &dyn Communicator, p: &Pattern) -> Result<(Self, u64)> {
        Ok(match op {
            Op::AllReduce => {
                let (buf, bad) = checked_once(comm, p)?;
                (Timed::AllReduce(buf), bad)
            }
            Op::ReduceScatter { buffers } => {
                let parts = crate::scatter::Parts::new(comm, &p.base, buffers)?;
                let bad = parts.checked(comm)?;
                (Timed::ReduceScatter(parts), bad)
            }
        })
    }

    fn run(&self, comm: &dyn Communicator) -> Result<()> {
        match self {
            Timed::AllReduce(buf) => Ok(comm.all_reduce(buf, ReduceOp::Sum)?),
            Timed::ReduceScatter(parts) => parts.run(comm),
        }
    }

    /// The second checked run (its wrong elements); the all-reduce's timed buffer is freed
    /// first, so that one buffer of it is alive at a time.
    fn last(self, comm: &dyn Communicator, p: &Pattern) -> Result<u64> {
        match self {
            Timed::AllReduce(buf) => {
                drop(buf);
                Ok(checked_once(comm, p)?.1)
            }
            Timed::ReduceScatter(parts) => parts.checked(comm),
        }
    }
}

/// Runs the sweep on this rank; returns the records (identical on every rank).
pub fn sweep(
    comm: &dyn Communicator,
    device: &Device,
    device_name: &str,
    cfg: &SweepConfig,
    mut on_record: impl FnMut(&AllReduceRecord) -> Result<()>,
) -> Result<Vec<AllReduceRecord>> {
    let world = comm.world_size();
    let mut out = Vec::new();
    for &bytes in &cfg.sizes_bytes {
        let count = match cfg.op {
            Op::AllReduce => bytes / 4,
            Op::ReduceScatter { .. } => bytes / 2,
        };
        if count < world {
            bail!("message size {bytes} B is too small for {world} ranks");
        }
        let p = Pattern::new(count, device)?;
        let (timed, bad_before) = Timed::first(cfg.op, comm, &p)?;
        for _ in 0..cfg.warmup {
            timed.run(comm)?;
        }
        let timer = Timer::start(device)?;
        for _ in 0..cfg.iters {
            timed.run(comm)?;
        }
        let secs = timer.stop()?;
        let bad_after = timed.last(comm, &p)?;
        // Slowest rank's time and everybody's mismatch count, through the backend itself.
        let stats = Tensor::new(&[secs as f32, (bad_before + bad_after) as f32], device)?;
        let stats_max = stats.copy()?;
        comm.all_reduce(&stats_max, ReduceOp::Max)?;
        let v = stats_max.to_vec1::<f32>()?;
        let (secs, bad) = (v[0] as f64, v[1] as u64);
        let t = secs / cfg.iters as f64;
        let algbw = bytes as f64 / t / 1e9;
        let (bench, busbw_gbs) = match cfg.op {
            Op::AllReduce => ("allreduce", busbw(algbw, world)),
            Op::ReduceScatter { .. } => {
                ("reduce-scatter", algbw * (world - 1) as f64 / world as f64)
            }
        };
        let rec = AllReduceRecord {
            bench: bench.into(),
            backend: comm.backend().into(),
            world,
            bytes,
            iters: cfg.iters,
            time_us: t * 1e6,
            algbw_gbs: algbw,
            busbw_gbs,
            correct: bad == 0,
            device: device_name.into(),
        };
        on_record(&rec)?;
        if bad != 0 {
            bail!("{bench} of {bytes} B on {world} ranks: {bad} wrong elements");
        }
        out.push(rec);
    }
    Ok(out)
}

/// nccl-tests' fixed-column table.
pub fn header() -> String {
    format!(
        "{:>8} {:>6} {:>12} {:>10} {:>12} {:>12} {:>12} {:>6}",
        "backend", "ranks", "size(B)", "size", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "check"
    )
}

pub fn row(r: &AllReduceRecord) -> String {
    format!(
        "{:>8} {:>6} {:>12} {:>10} {:>12.1} {:>12.2} {:>12.2} {:>6}",
        r.backend,
        r.world,
        r.bytes,
        human_bytes(r.bytes),
        r.time_us,
        r.algbw_gbs,
        r.busbw_gbs,
        if r.correct { "OK" } else { "FAIL" }
    )
}

pub fn human_bytes(b: usize) -> String {
    let mib = b as f64 / (1u64 << 20) as f64;
    if mib >= 1024.0 {
        format!("{:.0} GiB", mib / 1024.0)
    } else if mib >= 1.0 {
        format!("{mib:.0} MiB")
    } else {
        format!("{:.0} KiB", b as f64 / 1024.0)
    }
}

/// Parses "0.5,1,10" (MiB) into byte counts, rejecting bad entries by name.
pub fn parse_sizes_mib(spec: &str) -> Result<Vec<usize>> {
    spec.split(',')
        .map(|s| {
            let v: f64 = s
                .trim()
                .parse()
                .map_err(|_| anyhow::anyhow!("--sizes-mib: {s:?} is not a number"))?;
            if !(v.is_finite() && v > 0.0) {
                bail!("--sizes-mib: {s:?} must be a positive size in MiB");
            }
            if v > MAX_MIB {
                bail!("--sizes-mib: {s:?} MiB is above the largest message, 1 TiB ({MAX_MIB} MiB)");
            }
            Ok(((v * (1u64 << 20) as f64) as usize / 4) * 4)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use comm::{cpu_group, CommOptions};

    fn run_cpu(world: usize, sizes: Vec<usize>) -> Vec<AllReduceRecord> {
        run_cpu_op(world, sizes, Op::AllReduce)
    }

    fn run_cpu_op(world: usize, sizes: Vec<usize>, op: Op) -> Vec<AllReduceRecord> {
        let cfg = SweepConfig {
            sizes_bytes: sizes,
            warmup: 1,
            iters: 2,
            op,
        };
        let handles: Vec<_> = cpu_group(world, CommOptions::default())
            .unwrap()
            .into_iter()
            .map(|c| {
                let cfg = cfg.clone();
                std::thread::spawn(move || {
                    sweep(&c, &Device::Cpu, "cpu", &cfg, |_| Ok(())).unwrap()
                })
            })
            .collect();
        let all: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        all[0].clone()
    }

    #[test]
    fn cpu_sweep_is_correct_for_several_world_sizes() {
        for world in [2, 3, 4] {
            let recs = run_cpu(world, vec![4 * 1000, 4 * 4099]);
            assert_eq!(recs.len(), 2);
            assert!(recs
                .iter()
                .all(|r| r.correct && r.world == world && r.busbw_gbs > 0.0));
        }
    }

    /// The deferred bf16 reduce-scatter, one buffer a launch and several (uneven sizes
    /// too: each buffer is cut to a multiple of the world): every rank's chunk exact.
    #[test]
    fn cpu_reduce_scatter_sweep_is_correct_with_one_buffer_and_several() {
        for world in [2, 3, 4] {
            for buffers in [1, 3] {
                let recs = run_cpu_op(
                    world,
                    vec![2 * 1000, 2 * 4099],
                    Op::ReduceScatter { buffers },
                );
                assert_eq!(recs.len(), 2);
                for r in &recs {
                    assert!(
                        r.correct && r.bench == "reduce-scatter" && r.world == world,
                        "{r:?}"
                    );
                    let want = r.algbw_gbs * (world - 1) as f64 / world as f64;
                    assert!((r.busbw_gbs - want).abs() < 1e-9, "{r:?}");
                }
            }
        }
    }

    #[test]
    fn the_cpu_default_sweep_fits_a_laptop_and_the_gpu_one_is_the_seeds() {
        let cpu = sizes_bytes(None, false).unwrap();
        let copies = Op::AllReduce.copies();
        let need = budget::collective(*cpu.iter().max().unwrap(), copies, 8, false).unwrap();
        assert!(need <= 3 << 30, "8 CPU ranks need {need} B");
        assert_eq!(
            sizes_bytes(None, true).unwrap().last(),
            Some(&(1usize << 30))
        );
    }

    #[test]
    fn sizes_are_parsed_and_bad_ones_named() {
        assert_eq!(parse_sizes_mib("0.5,1").unwrap(), vec![1 << 19, 1 << 20]);
        assert!(parse_sizes_mib("1,x")
            .unwrap_err()
            .to_string()
            .contains("\"x\""));
        assert!(parse_sizes_mib("-1").is_err());
        for huge in ["1e12", "1e30", "inf"] {
            let e = parse_sizes_mib(huge).unwrap_err().to_string();
            assert!(e.starts_with("--sizes-mib:"), "{e}");
        }
        let e = check_sizes(&[1 << 20], &[1, 2], false, Op::AllReduce)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--ranks 1") && e.contains("moves nothing"),
            "{e}"
        );
        let e = check_sizes(&[4], &[2], false, Op::AllReduce)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--sizes-mib") && e.contains("--ranks 2"), "{e}");
    }
}

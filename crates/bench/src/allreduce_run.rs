//! Running the all-reduce sweep on ranks: in-process CPU groups (one thread per rank), one
//! launched NCCL or CPU-process rank, or the launcher that starts one group per rank count
//! on this node.

use crate::allreduce::{self, SweepConfig};
use crate::cli::BackendArg;
use crate::{records, topology};
use anyhow::{Context, Result};
use candle_core::Device;
use comm::CommOptions;
use std::path::PathBuf;

/// `bench allreduce`'s flags.
#[derive(clap::Args)]
pub struct Args {
    /// nccl: one process per GPU. cpu: one process per rank (the multi-process CPU
    /// backend, ranks as real processes under the launcher, the seeds' Gloo setting);
    /// with --threads, the in-process CPU backend (one thread per rank).
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendArg,
    /// With --backend cpu: ranks as threads of this process instead of processes.
    #[arg(long)]
    pub threads: bool,
    /// Rank counts; on GPUs those above the GPU count are skipped.
    #[arg(long, value_delimiter = ',', value_parser = crate::cli::ranks, default_values_t = [2usize, 4, 6, 8])]
    pub ranks: Vec<usize>,
    /// Message sizes in MiB. Default on GPUs: the seeds' 0.5,1,10,50,100,500,1024; on
    /// the CPU: 0.5,1,10,64, which fits a laptop (the in-process ranks hold about
    /// 5 × size × ranks bytes: 2.5 GiB at 64 MiB on 8 ranks). Go larger by naming
    /// the sizes, e.g. --sizes-mib 0.5,1,10,50,100,500,1024 --ranks 2 (about 10 GiB);
    /// a sweep that cannot fit in the available memory is refused before it starts.
    #[arg(long)]
    pub sizes_mib: Option<String>,
    /// Untimed collectives per size before the timed ones.
    #[arg(long, default_value_t = 5, value_parser = crate::cli::warmup)]
    pub warmup: usize,
    /// Timed collectives per size (the slowest rank's mean time is recorded).
    #[arg(long, default_value_t = 20, value_parser = crate::cli::steps)]
    pub iters: usize,
    /// The collective: the fp32 all-reduce (nccl-tests'), or the deferred bf16
    /// reduce-scatter that DDP and ZeRO-1 launch in the backward (records
    /// `"bench":"reduce-scatter"`; on NCCL at 2 and 4 ranks, comm's copy engines).
    #[arg(long, value_enum, default_value = "all-reduce")]
    pub op: OpArg,
    /// With --op reduce-scatter: the message split into this many buffers of one launch
    /// (a DDP launch holds a stage's gradients, several tensors).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub buffers: u64,
    /// JSON lines are appended here.
    #[arg(long, default_value = "report/results.jsonl")]
    pub out: PathBuf,
}

/// `bench allreduce --op`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum OpArg {
    AllReduce,
    ReduceScatter,
}

/// `bench allreduce`: the sweep on the backend `a` names (resolved: not `auto`), as this
/// process's part (a launched rank: RANK set) or the whole of it.
pub fn run(a: Args) -> Result<()> {
    let nccl = matches!(a.backend, BackendArg::Nccl);
    let sizes_bytes = allreduce::sizes_bytes(a.sizes_mib.as_deref(), nccl)?;
    let op = match a.op {
        OpArg::AllReduce if a.buffers > 1 => {
            anyhow::bail!("--buffers {}: only with --op reduce-scatter", a.buffers)
        }
        OpArg::AllReduce => allreduce::Op::AllReduce,
        OpArg::ReduceScatter => allreduce::Op::ReduceScatter {
            buffers: a.buffers as usize,
        },
    };
    allreduce::check_sizes(&sizes_bytes, &a.ranks, nccl, op)?;
    let out = records::Out::open(&a.out)?;
    let cfg = SweepConfig {
        sizes_bytes,
        warmup: a.warmup,
        iters: a.iters,
        op,
    };
    let rank = std::env::var("RANK").is_ok();
    match a.backend {
        BackendArg::Cpu if a.threads => cpu_sweeps(&a.ranks, &cfg, &out),
        BackendArg::Cpu if rank => cpu_proc_rank(&cfg, &out),
        BackendArg::Cpu => cpu_proc_sweeps(&a.ranks, &out),
        BackendArg::Nccl if rank => nccl_rank(&cfg, &out),
        BackendArg::Nccl => nccl_sweeps(&a.ranks, &out),
        BackendArg::Auto => anyhow::bail!("allreduce: the backend is resolved before it runs"),
    }
}

/// In-process CPU groups, one thread per rank.
pub fn cpu_sweeps(ranks: &[usize], cfg: &SweepConfig, out: &records::Out) -> Result<()> {
    println!("{}", allreduce::header());
    let bar = indicatif::ProgressBar::new(ranks.len() as u64).with_message("cpu all-reduce sweeps");
    for &world in ranks {
        crate::group::run(false, world, "all-reduce sweep", None, |r| {
            let mut sink =
                (r.comm.rank() == 0).then(|| records::print_and_store(out, allreduce::row));
            allreduce::sweep(
                r.comm.as_ref(),
                &Device::Cpu,
                "cpu",
                cfg,
                |rec| match sink.as_mut() {
                    Some(f) => bar.suspend(|| f(rec)),
                    None => Ok(()),
                },
            )
            .map(|_| ())
        })?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(())
}

/// One rank of an NCCL sweep (launched with RANK, WORLD_SIZE, ... set).
pub fn nccl_rank(cfg: &SweepConfig, out: &records::Out) -> Result<()> {
    let env = comm::DistEnv::from_env()?;
    let c = comm::NcclComm::new(&env, env.local_rank, CommOptions::from_env()?)?;
    let name = topology::gpus()
        .get(env.local_rank)
        .cloned()
        .unwrap_or_else(|| "cuda".into());
    let device = c.device().clone();
    let mut sink = (env.rank == 0).then(|| records::print_and_store(out, allreduce::row));
    allreduce::sweep(&c, &device, &name, cfg, |r| {
        sink.as_mut().map_or(Ok(()), |f| f(r))
    })?;
    Ok(())
}

/// The label of the multi-process CPU backend's records (the threads' are "cpu").
pub const CPU_PROC: &str = "cpu-proc";

/// One rank of a multi-process CPU sweep (launched with RANK, WORLD_SIZE, ... set).
pub fn cpu_proc_rank(cfg: &SweepConfig, out: &records::Out) -> Result<()> {
    let (env, c) = comm::init_from_env(comm::Backend::Cpu, CommOptions::from_env()?)?;
    let mut sink = (env.rank == 0).then(|| records::print_and_store(out, allreduce::row));
    allreduce::sweep(c.as_ref(), &Device::Cpu, "cpu", cfg, |r| {
        let mut r = r.clone();
        r.backend = CPU_PROC.into();
        sink.as_mut().map_or(Ok(()), |f| f(&r))
    })?;
    Ok(())
}

/// Orchestrates one launch of processes per rank count (the CPU backend's Gloo setting).
pub fn cpu_proc_sweeps(ranks: &[usize], out: &records::Out) -> Result<()> {
    let _ = out;
    let exe = std::env::current_exe()?;
    let args: Vec<String> = std::env::args().skip(1).collect();
    println!("{}", allreduce::header());
    for &world in ranks {
        comm::launch::run(&comm::launch::LaunchSpec::local(
            world,
            exe.to_string_lossy(),
            args.clone(),
        ))
        .with_context(|| format!("all-reduce sweep on {world} CPU processes"))?;
    }
    Ok(())
}

/// Orchestrates one launch per rank count on this node's GPUs.
pub fn nccl_sweeps(ranks: &[usize], out: &records::Out) -> Result<()> {
    let topo = topology::probe()
        .context("no NVIDIA GPU found (nvidia-smi -L lists none); use --backend cpu")?;
    println!(
        "GPUs: {} × {}; NVLink: {} links × {:.1} GB/s",
        topo.gpus, topo.gpu, topo.nvlinks, topo.link_gbs
    );
    out.append(&topo)?;
    let exe = std::env::current_exe()?;
    // Re-run this same command line as each rank.
    let args: Vec<String> = std::env::args().skip(1).collect();
    println!("{}", allreduce::header());
    for &world in ranks.iter().filter(|&&w| w <= topo.gpus) {
        comm::launch::run(&comm::launch::LaunchSpec::local(
            world,
            exe.to_string_lossy(),
            args.clone(),
        ))
        .with_context(|| format!("all-reduce sweep on {world} GPUs"))?;
    }
    let skipped: Vec<usize> = ranks.iter().copied().filter(|&w| w > topo.gpus).collect();
    if !skipped.is_empty() {
        println!(
            "skipped rank counts {skipped:?}: only {} GPUs here",
            topo.gpus
        );
    }
    Ok(())
}

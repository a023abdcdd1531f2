//! `bench`: the project's benchmarks and report writer.
//!
//!   bench allreduce --backend nccl --ranks 2,4,6,8   (spawns one process per GPU per rank count)
//!   bench allreduce --backend cpu  --ranks 2,4       (in-process threads)
//!   bench ddp --backend nccl --ranks 2 --size xl --dtype fp32,bf16   (one process per GPU)
//!   bench report --results out/results.jsonl --torch out/torch.jsonl --out report/
//!                [--isoflops data/isoflops_curves.json]

mod allreduce;
mod ddp;
mod group;
mod memory;
mod modelcheck;
mod records;
mod report;
mod rmsnorm;
mod single;
mod timer;
mod topology;
mod trace;
mod zero1;

use allreduce::{parse_sizes_mib, SweepConfig, DEFAULT_SIZES_MIB};
use anyhow::{bail, Context, Result};
use candle_core::Device;
use clap::{Parser, Subcommand, ValueEnum};
use comm::{CommOptions, Communicator};
use std::path::PathBuf;

#[derive(Parser)]
#[command(about = "Benchmarks of the data-parallel stack")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BackendArg {
    Nccl,
    Cpu,
}

#[derive(Subcommand)]
enum Cmd {
    /// All-reduce bandwidth sweep (fp32, sum, in place).
    Allreduce {
        #[arg(long, value_enum, default_value = "cpu")]
        backend: BackendArg,
        /// Rank counts; on GPUs those above the GPU count are skipped.
        #[arg(long, value_delimiter = ',', default_values_t = [2usize, 4, 6, 8])]
        ranks: Vec<usize>,
        /// Message sizes in MiB (default: the seeds' 0.5 … 1024).
        #[arg(long)]
        sizes_mib: Option<String>,
        #[arg(long, default_value_t = 5)]
        warmup: usize,
        #[arg(long, default_value_t = 20)]
        iters: usize,
        /// JSON lines are appended here.
        #[arg(long, default_value = "report/results.jsonl")]
        out: PathBuf,
    },
    /// Single-GPU training step of the LM: forward, backward, AdamW timed separately.
    Single {
        /// Model sizes, comma-separated (small, medium, large, xl, 2.7B).
        #[arg(long, value_delimiter = ',', default_value = "small")]
        size: Vec<String>,
        #[arg(long, value_enum, value_delimiter = ',', default_value = "fp32")]
        dtype: Vec<single::Precision>,
        #[arg(long, value_enum, default_value = "step")]
        mode: single::Mode,
        #[arg(long, default_value_t = 3)]
        warmup: usize,
        #[arg(long, default_value_t = 10)]
        steps: usize,
        #[arg(long, default_value_t = 8)]
        batch: usize,
        /// Run on the CPU instead of GPU 0.
        #[arg(long)]
        cpu: bool,
        #[arg(long, default_value = "report/results.jsonl")]
        out: PathBuf,
    },
    /// DDP strategies (naive, flat, overlap, bucketed sweep): step, compute, communication
    /// and exposed communication time, against this GPU alone.
    Ddp {
        #[arg(long, value_enum, default_value = "cpu")]
        backend: BackendArg,
        /// Ranks: GPUs (one process each) or CPU threads.
        #[arg(long, default_value_t = 2)]
        ranks: usize,
        #[arg(long, value_delimiter = ',', default_value = "small")]
        size: Vec<String>,
        #[arg(long, value_enum, value_delimiter = ',', default_value = "fp32")]
        dtype: Vec<single::Precision>,
        /// naive, flat, overlap, bucketed (expanded over --buckets-mb), bucketed:MB.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "naive,flat,overlap,bucketed"
        )]
        strategies: Vec<String>,
        #[arg(long, value_delimiter = ',', default_values_t = [1.0, 5.0, 10.0, 25.0, 50.0, 100.0, 500.0, 1000.0])]
        buckets_mb: Vec<f64>,
        #[arg(long, default_value_t = 2)]
        warmup: usize,
        #[arg(long, default_value_t = 5)]
        steps: usize,
        /// Sequences per rank.
        #[arg(long, default_value_t = 8)]
        batch: usize,
        /// Send fp32 gradients even when the model computes in bf16 (as PyTorch autocast does).
        #[arg(long)]
        fp32_grads: bool,
        /// Trace one extra step per strategy (CUDA events on both streams) and write
        /// Chrome trace JSON files here; records get the overlap ratio (NCCL only).
        #[arg(long)]
        trace_dir: Option<PathBuf>,
        #[arg(long, default_value = "report/results.jsonl")]
        out: PathBuf,
    },
    /// Optimizer-state sharding: DDP vs ShardedOptimizer vs Zero1, step time and memory.
    Zero1 {
        #[arg(long, value_enum, default_value = "cpu")]
        backend: BackendArg,
        #[arg(long, default_value_t = 2)]
        ranks: usize,
        #[arg(long, default_value = "tiny")]
        size: String,
        #[arg(long, value_delimiter = ',', default_value = "ddp,sharded,zero1")]
        modes: Vec<String>,
        /// DDP's bucket size for the ddp and sharded modes.
        #[arg(long, default_value_t = 25.0)]
        bucket_mb: f64,
        #[arg(long, default_value_t = 2)]
        warmup: usize,
        #[arg(long, default_value_t = 5)]
        steps: usize,
        #[arg(long, default_value_t = 8)]
        batch: usize,
        #[arg(long, default_value = "report/results.jsonl")]
        out: PathBuf,
    },
    /// A tiny LM on GPU 0 against the CPU: loss and gradients, fp32 and bf16.
    ModelCheck,
    /// RMSNorm micro-benchmark: fused vs composed vs LayerNorm, 50,000 rows (GPU 0).
    Rmsnorm {
        #[arg(long, default_value_t = 50_000)]
        rows: usize,
        #[arg(long, default_value_t = 20)]
        iters: usize,
    },
    /// Writes report.md and plots from a run's JSON lines.
    Report {
        #[arg(long, default_value = "report/results.jsonl")]
        results: PathBuf,
        /// PyTorch anchor lines from the same run (optional).
        #[arg(long)]
        torch: Option<PathBuf>,
        #[arg(long, default_value = "report")]
        out: PathBuf,
        /// IsoFLOPs runs for the scaling-law section (relative paths are also looked up
        /// from the workspace root); the section is skipped when the file is absent.
        #[arg(long, default_value = report::DEFAULT_ISOFLOPS)]
        isoflops: PathBuf,
    },
}

fn main() {
    if let Err(e) = run(Cli::parse()) {
        eprintln!("bench: error: {e:#}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.cmd {
        Cmd::Allreduce {
            backend,
            ranks,
            sizes_mib,
            warmup,
            iters,
            out,
        } => {
            let sizes_bytes = match sizes_mib {
                Some(s) => parse_sizes_mib(&s)?,
                None => DEFAULT_SIZES_MIB
                    .iter()
                    .map(|m| (m * (1u64 << 20) as f64) as usize)
                    .collect(),
            };
            if iters == 0 {
                bail!("--iters must be at least 1");
            }
            if let Some(r) = ranks.iter().find(|&&r| r < 1) {
                bail!("--ranks: {r} is not a rank count");
            }
            let cfg = SweepConfig {
                sizes_bytes,
                warmup,
                iters,
            };
            match backend {
                BackendArg::Cpu => cpu_sweeps(&ranks, &cfg, &out),
                BackendArg::Nccl if std::env::var("RANK").is_ok() => nccl_rank(&cfg, &out),
                BackendArg::Nccl => nccl_sweeps(&ranks, &out),
            }
        }
        Cmd::Single {
            size,
            dtype,
            mode,
            warmup,
            steps,
            batch,
            cpu,
            out,
        } => {
            let device = if cpu {
                Device::Cpu
            } else {
                Device::new_cuda(0).context("GPU 0 (use --cpu to run on the CPU)")?
            };
            println!("{}", single::header());
            for s in &size {
                for &d in &dtype {
                    // Dense peak of an H100/H200 SXM: fp32 (no tensor cores) and bf16 tensor cores.
                    let peak = (!cpu).then_some(if d == single::Precision::Fp32 {
                        67.0
                    } else {
                        989.0
                    });
                    let r = single::run(s, d, mode, warmup, steps, batch, &device, peak)?;
                    println!("{}", single::row(&r));
                    records::append(&out, &r)?;
                }
            }
            Ok(())
        }
        Cmd::Ddp {
            backend,
            ranks,
            size,
            dtype,
            strategies,
            buckets_mb,
            warmup,
            steps,
            batch,
            fp32_grads,
            trace_dir,
            out,
        } => {
            if trace_dir.is_some() && matches!(backend, BackendArg::Cpu) {
                bail!("--trace-dir: tracing needs CUDA events (--backend nccl)");
            }
            let cfg = ddp::DdpBenchConfig {
                sizes: size,
                dtypes: dtype,
                strategies: ddp::strategies(&strategies, &buckets_mb)?,
                warmup,
                steps,
                batch,
                bf16_grads: !fp32_grads,
                trace_dir,
            };
            ddp_bench(backend, ranks, &cfg, &out)
        }
        Cmd::Zero1 {
            backend,
            ranks,
            size,
            modes,
            bucket_mb,
            warmup,
            steps,
            batch,
            out,
        } => {
            let nccl = matches!(backend, BackendArg::Nccl);
            group::run(nccl, ranks, "ZeRO benchmark", &zero1::header(), |r| {
                let rank0 = r.comm.rank() == 0;
                zero1::run_rank(
                    r.comm,
                    &r.device,
                    &size,
                    &modes,
                    bucket_mb,
                    warmup,
                    steps,
                    batch,
                    |rec| {
                        if rank0 {
                            println!("{}", zero1::row(rec));
                            if let Err(e) = records::append(&out, rec) {
                                eprintln!("bench: cannot append to {}: {e}", out.display());
                            }
                        }
                    },
                )
            })
        }
        Cmd::ModelCheck => {
            let gpu = Device::new_cuda(0).context("model-check needs GPU 0")?;
            for (dtype, dl, worst) in modelcheck::run(&gpu)? {
                println!("model-check {dtype:?}: |loss GPU - CPU| = {dl:.2e}, worst gradient error {worst:.2e} (relative): OK");
            }
            let d = modelcheck::fused_adamw(&gpu)?;
            println!("model-check fused AdamW vs candle-op AdamW, 3 steps: max |param diff| = {d:.2e}: OK");
            let (dy, dg) = modelcheck::fused_rmsnorm(&gpu)?;
            println!("model-check fused RMSNorm vs composition (GPU, 2368x1600): max |y diff| {dy:.2e}, max relative grad diff {dg:.2e}: OK");
            Ok(())
        }
        Cmd::Rmsnorm { rows, iters } => {
            let gpu = Device::new_cuda(0).context("the RMSNorm benchmark needs GPU 0")?;
            println!(
                "{:>6} {:>10} {:>10} {:>12}",
                "cols", "variant", "fwd(ms)", "fwd+bwd(ms)"
            );
            for (cols, name, fwd, both) in rmsnorm::run(&gpu, rows, iters)? {
                println!("{cols:>6} {name:>10} {fwd:>10.3} {both:>12.3}");
            }
            Ok(())
        }
        Cmd::Report {
            results,
            torch,
            out,
            isoflops,
        } => {
            let isoflops = report::resolve_isoflops(&isoflops);
            report::write_report(&results, torch.as_deref(), &isoflops, &out)?;
            println!("wrote {}", out.join("report.md").display());
            Ok(())
        }
    }
}

fn print_and_store(out: &std::path::Path) -> impl FnMut(&records::AllReduceRecord) + '_ {
    move |r| {
        println!("{}", allreduce::row(r));
        if let Err(e) = records::append(out, r) {
            eprintln!("bench: cannot append to {}: {e}", out.display());
        }
    }
}

/// In-process CPU groups, one thread per rank.
fn cpu_sweeps(ranks: &[usize], cfg: &SweepConfig, out: &std::path::Path) -> Result<()> {
    println!("{}", allreduce::header());
    let bar = indicatif::ProgressBar::new(ranks.len() as u64).with_message("cpu all-reduce sweeps");
    for &world in ranks {
        let comms = comm::cpu_group(world, CommOptions::from_env()?)?;
        let results = std::thread::scope(|s| {
            let handles: Vec<_> = comms
                .into_iter()
                .map(|c| {
                    let bar = &bar;
                    s.spawn(move || {
                        let mut sink = (c.rank() == 0).then(|| print_and_store(out));
                        allreduce::sweep(&c, &Device::Cpu, "cpu", cfg, |r| {
                            if let Some(f) = sink.as_mut() {
                                bar.suspend(|| f(r))
                            }
                        })
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("rank thread panicked"))
                .collect::<Vec<_>>()
        });
        for r in results {
            r?;
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(())
}

/// One rank of an NCCL sweep (launched with RANK, WORLD_SIZE, ... set).
fn nccl_rank(cfg: &SweepConfig, out: &std::path::Path) -> Result<()> {
    let env = comm::DistEnv::from_env()?;
    let c = comm::NcclComm::new(&env, env.local_rank, CommOptions::from_env()?)?;
    let name = topology::gpus()
        .get(env.local_rank)
        .cloned()
        .unwrap_or_else(|| "cuda".into());
    let device = c.device().clone();
    let mut sink = (env.rank == 0).then(|| print_and_store(out));
    allreduce::sweep(&c, &device, &name, cfg, |r| {
        if let Some(f) = sink.as_mut() {
            f(r)
        }
    })?;
    Ok(())
}

/// Orchestrates one launch per rank count on this node's GPUs.
fn nccl_sweeps(ranks: &[usize], out: &std::path::Path) -> Result<()> {
    let topo = topology::probe()
        .context("no NVIDIA GPU found (nvidia-smi -L lists none); use --backend cpu")?;
    println!(
        "GPUs: {} × {}; NVLink: {} links × {:.1} GB/s",
        topo.gpus, topo.gpu, topo.nvlinks, topo.link_gbs
    );
    records::append(out, &topo)?;
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

/// The DDP benchmark: CPU threads, one NCCL rank (launched), or the launcher of the ranks.
fn ddp_bench(
    backend: BackendArg,
    ranks: usize,
    cfg: &ddp::DdpBenchConfig,
    out: &std::path::Path,
) -> Result<()> {
    let nccl = matches!(backend, BackendArg::Nccl);
    group::run(nccl, ranks, "DDP benchmark", &ddp::header(), |r| {
        let rank0 = r.comm.rank() == 0;
        let tracer = r.nccl.filter(|_| cfg.trace_dir.is_some());
        ddp::run_rank(r.comm, tracer, &r.device, cfg, |rec| {
            if rank0 {
                println!("{}", ddp::row(rec));
                if let Err(e) = records::append(out, rec) {
                    eprintln!("bench: cannot append to {}: {e}", out.display());
                }
            }
        })
    })
}

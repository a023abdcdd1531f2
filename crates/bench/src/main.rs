//! `bench`: the project's benchmarks and report writer.
//!
//!   bench allreduce --backend nccl --ranks 2,4,6,8   (spawns one process per GPU per rank count)
//!   bench allreduce --backend cpu  --ranks 2,4       (in-process threads)
//!   bench ddp --backend nccl --ranks 2 --size xl --dtype fp32,bf16   (one process per GPU)
//!   bench zero1 --backend nccl --ranks 2 --size xl   (DDP vs ShardedOptimizer vs Zero1)
//!   bench zero1-check --backend nccl --ranks 2       (checkpoint save/resume, tiny LM)
//!   bench report --results out/results.jsonl --torch out/torch.jsonl --out report/
//!                [--isoflops data/isoflops_curves.json]

mod allreduce;
mod allreduce_run;
mod ddp;
mod group;
mod memory;
mod modelcheck;
mod profile;
mod records;
mod report;
mod rmsnorm;
mod single;
mod timer;
mod topology;
mod trace;
mod zero1;
mod zero1_check;

use allreduce::{parse_sizes_mib, SweepConfig, DEFAULT_SIZES_MIB};
use anyhow::{bail, Context, Result};
use candle_core::Device;
use clap::{Parser, Subcommand, ValueEnum};
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
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "ddp,sharded,zero1,zero1-overlap,zero1-ahead"
        )]
        modes: Vec<String>,
        /// DDP's bucket size for the ddp, sharded and zero1-overlap/-ahead modes.
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
    /// ZeRO-1 checkpoint on the backend: resumed (other buckets) = uninterrupted = single
    /// process, tiny LM.
    Zero1Check {
        #[arg(long, value_enum, default_value = "cpu")]
        backend: BackendArg,
        #[arg(long, default_value_t = 2)]
        ranks: usize,
        #[arg(long, default_value_t = 6)]
        steps: usize,
        /// Save after this many steps, then resume there.
        #[arg(long, default_value_t = 3)]
        save_at: usize,
        /// Sequences per step over all ranks (divisible by --ranks).
        #[arg(long, default_value_t = 8)]
        global_batch: usize,
        /// Checkpoint directory (shared by the ranks; replaced).
        #[arg(long, default_value = "report/zero1-check-ckpt")]
        dir: PathBuf,
    },
    /// A tiny LM on GPU 0 against the CPU: loss and gradients, fp32 and bf16.
    ModelCheck,
    /// RMSNorm micro-benchmark: fused vs composed vs LayerNorm, 50,000 rows (GPU 0).
    Rmsnorm {
        #[arg(long, default_value_t = 50_000)]
        rows: usize,
        #[arg(long, default_value_t = 20)]
        iters: usize,
        /// JSON lines are appended here.
        #[arg(long, default_value = "report/results.jsonl")]
        out: PathBuf,
    },
    /// GPU time and memory per component of one step (CUDA events at the model's marks):
    /// table, JSON lines, flame graph and memory timeline SVGs.
    Profile {
        #[arg(long, value_delimiter = ',', default_value = "xl")]
        size: Vec<String>,
        #[arg(long, value_delimiter = ',', default_value = "fp32")]
        dtype: Vec<single::Precision>,
        /// fwd (forward only) or step (forward, backward, AdamW).
        #[arg(long, value_delimiter = ',', default_value = "step")]
        mode: Vec<String>,
        #[arg(long, default_value = "report/results.jsonl")]
        out: PathBuf,
        #[arg(long, default_value = "report/profile")]
        svg_dir: PathBuf,
        /// Run on the CPU (wall clock between marks) instead of GPU 0.
        #[arg(long)]
        cpu: bool,
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
                BackendArg::Cpu => allreduce_run::cpu_sweeps(&ranks, &cfg, &out),
                BackendArg::Nccl if std::env::var("RANK").is_ok() => {
                    allreduce_run::nccl_rank(&cfg, &out)
                }
                BackendArg::Nccl => allreduce_run::nccl_sweeps(&ranks, &out),
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
            ddp::run(matches!(backend, BackendArg::Nccl), ranks, &cfg, &out)
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
            let cfg = zero1::ZeroBenchConfig {
                size,
                modes,
                bucket_mb,
                warmup,
                steps,
                batch,
            };
            zero1::run(matches!(backend, BackendArg::Nccl), ranks, &cfg, &out)
        }
        Cmd::Zero1Check {
            backend,
            ranks,
            steps,
            save_at,
            global_batch,
            dir,
        } => {
            let cfg = zero1_check::CheckConfig {
                steps,
                save_at,
                global_batch,
                dir,
            };
            group::run(
                matches!(backend, BackendArg::Nccl),
                ranks,
                "zero1-check",
                None,
                |r| zero1_check::run_rank(r.comm, &r.device, &cfg),
            )
        }
        Cmd::ModelCheck => {
            let gpu = Device::new_cuda(0).context("model-check needs GPU 0")?;
            for (dtype, dl, worst) in modelcheck::run(&gpu)? {
                println!("model-check {dtype:?}: |loss GPU - CPU| = {dl:.2e}, worst gradient error {worst:.2e} (relative): OK");
            }
            let d = modelcheck::fused_adamw(&gpu)?;
            println!("model-check fused AdamW vs candle-op AdamW, 3 steps: max |param diff| = {d:.2e}: OK");
            for (dtype, c) in modelcheck::fused_kernels(&gpu)? {
                println!(
                    "model-check fused {:<20} {dtype:?} vs composition (GPU): value {:.2e}, gradient {:.2e} (relative): OK",
                    c.op, c.value, c.grad
                );
            }
            Ok(())
        }
        Cmd::Profile {
            size,
            dtype,
            mode,
            out,
            svg_dir,
            cpu,
        } => {
            let dev = if cpu {
                Device::Cpu
            } else {
                Device::new_cuda(0).context("GPU 0 (use --cpu to run on the CPU)")?
            };
            for s in &size {
                for &d in &dtype {
                    for m in &mode {
                        let step = match m.as_str() {
                            "step" => true,
                            "fwd" => false,
                            other => bail!("--mode: {other:?} is not fwd or step"),
                        };
                        profile::run(s, d, step, &dev, &out, &svg_dir)?;
                    }
                }
            }
            Ok(())
        }
        Cmd::Rmsnorm { rows, iters, out } => {
            let gpu = Device::new_cuda(0).context("the RMSNorm benchmark needs GPU 0")?;
            println!(
                "{:>6} {:>10} {:>10} {:>12}",
                "cols", "variant", "fwd(ms)", "fwd+bwd(ms)"
            );
            for (cols, name, fwd, both) in rmsnorm::run(&gpu, rows, iters)? {
                println!("{cols:>6} {name:>10} {fwd:>10.3} {both:>12.3}");
                let rec = serde_json::json!({
                    "bench": "rmsnorm", "rows": rows, "cols": cols, "variant": name,
                    "iters": iters, "fwd_ms": fwd, "fwd_bwd_ms": both,
                });
                records::append(&out, &rec)?;
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

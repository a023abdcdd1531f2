//! The `bench` command line (clap): one subcommand per benchmark or check.

use crate::{report, single};
use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// A bucket size, as `ddp::Strategy::validate` accepts it (clap names the flag on error).
fn positive_mb(s: &str) -> Result<f64, String> {
    let bad = || format!("{s:?} is not a positive number of MiB");
    let mb: f64 = s.trim().parse().map_err(|_| bad())?;
    ddp::Strategy::Bucketed { bucket_mb: mb }
        .validate()
        .map_err(|_| bad())?;
    Ok(mb)
}

/// The most timed steps, iterations or warm-up steps a run takes (a bound on the loops and
/// on the per-step timing buffers).
pub const MAX_STEPS: usize = 1_000_000;
/// The most ranks one `bench` starts on this node (CPU threads or local GPUs).
pub const MAX_RANKS: usize = 256;

fn whole(s: &str, lo: usize, hi: usize) -> Result<usize, String> {
    let n: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a whole number"))?;
    if n < lo {
        return Err(format!("{n} is below {lo}"));
    }
    if n > hi {
        return Err(format!("{n} is above the bound of {hi}"));
    }
    Ok(n)
}

/// Timed steps or iterations: 1..=[`MAX_STEPS`].
pub(crate) fn steps(s: &str) -> Result<usize, String> {
    whole(s, 1, MAX_STEPS)
}

/// Untimed warm-up steps: 0..=[`MAX_STEPS`].
pub(crate) fn warmup(s: &str) -> Result<usize, String> {
    whole(s, 0, MAX_STEPS)
}

/// A rank count: 1..=[`MAX_RANKS`].
pub(crate) fn ranks(s: &str) -> Result<usize, String> {
    whole(s, 1, MAX_RANKS)
}

/// zero1-check's global batch of tiny-LM sequences: 1..=4096 (a few MB each on a rank).
fn check_batch(s: &str) -> Result<usize, String> {
    whole(s, 1, 4096)
}

/// Sequences or rows: at least 1 (what they allocate is checked against the memory there
/// is before the run, `budget`).
pub(crate) fn at_least_1(s: &str) -> Result<usize, String> {
    whole(s, 1, usize::MAX)
}

#[derive(Parser)]
#[command(about = "Benchmarks of the data-parallel stack")]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendArg {
    /// nccl where this binary was built with CUDA and a GPU is visible, else cpu (the
    /// choice is printed).
    Auto,
    Nccl,
    Cpu,
}

impl BackendArg {
    /// `Auto` made concrete (comm::Backend::auto), the choice and why printed on stderr.
    pub fn resolve(self) -> BackendArg {
        match self {
            BackendArg::Auto => {
                let (b, why) = comm::Backend::auto();
                // Once: the ranks a sweep spawns re-run this command line (RANK set).
                if comm::env::prints_for_all_ranks() {
                    eprintln!("bench: device: {why}; --backend nccl|cpu to choose");
                }
                match b {
                    comm::Backend::Nccl => BackendArg::Nccl,
                    comm::Backend::Cpu => BackendArg::Cpu,
                }
            }
            b => b,
        }
    }
}

/// Whether a one-process benchmark runs on the CPU: `--cpu`, or no usable GPU (said why).
pub fn on_cpu(cpu_flag: bool) -> bool {
    cpu_flag || BackendArg::Auto.resolve() == BackendArg::Cpu
}

impl Cmd {
    /// The `--backend` of the subcommands that take one.
    pub fn backend_mut(&mut self) -> Option<&mut BackendArg> {
        match self {
            Cmd::Allreduce(a) => Some(&mut a.backend),
            Cmd::Ddp { backend, .. }
            | Cmd::Zero1 { backend, .. }
            | Cmd::Zero1Check { backend, .. } => Some(backend),
            Cmd::DdpCheck(a) => Some(&mut a.backend),
            _ => None,
        }
    }
}

#[derive(Subcommand)]
pub enum Cmd {
    /// All-reduce bandwidth sweep (fp32, sum, in place).
    Allreduce(crate::allreduce_run::Args),
    /// Single-GPU training step of the LM: forward, backward, AdamW timed separately.
    Single {
        /// Model sizes, comma-separated (small, medium, large, xl, 2.7B, 6.7B, 13B).
        #[arg(long, value_delimiter = ',', default_value = "small")]
        size: Vec<String>,
        #[arg(long, value_enum, value_delimiter = ',', default_value = "fp32")]
        dtype: Vec<single::Precision>,
        #[arg(long, value_enum, default_value = "step")]
        mode: single::Mode,
        #[arg(long, default_value_t = 3, value_parser = warmup)]
        warmup: usize,
        #[arg(long, default_value_t = 10, value_parser = steps)]
        steps: usize,
        #[arg(long, default_value_t = 8, value_parser = at_least_1)]
        batch: usize,
        /// Run on the CPU (without it: GPU 0 where built with CUDA and one is visible, else
        /// the CPU, saying why).
        #[arg(long)]
        cpu: bool,
        /// fp32 GEMMs on TF32 tensor cores (PyTorch's allow_tf32); off by default, named
        /// in every record ("fp32 tf32"); no effect on bf16 or the CPU.
        #[arg(long)]
        tf32: bool,
        /// The step's options (graph, AdamW's place, the side stream, clipping).
        #[command(flatten)]
        step: crate::single_step::StepFlags,
        /// Compute with this GEMM choice table (a `train` run's gemm-choices.json, or one
        /// --save-gemm-choices wrote); refused where it is not one or holds for another GPU.
        #[arg(long)]
        gemm_choices: Option<PathBuf>,
        /// Write the process's GEMM choice table here at the end (CUDA).
        #[arg(long)]
        save_gemm_choices: Option<PathBuf>,
        #[arg(long, default_value = "report/results.jsonl")]
        out: PathBuf,
    },
    /// DDP strategies (naive, flat, overlap, bucketed sweep): step, compute, communication
    /// and exposed communication time, against this GPU alone.
    Ddp {
        #[arg(long, value_enum, default_value = "auto")]
        backend: BackendArg,
        /// Ranks: GPUs (one process each) or CPU threads.
        #[arg(long, default_value_t = 2, value_parser = ranks)]
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
        #[arg(long, value_delimiter = ',', value_parser = positive_mb, default_values_t = [1.0, 5.0, 10.0, 25.0, 50.0, 100.0, 500.0, 1000.0])]
        buckets_mb: Vec<f64>,
        #[arg(long, default_value_t = 2, value_parser = warmup)]
        warmup: usize,
        #[arg(long, default_value_t = 5, value_parser = steps)]
        steps: usize,
        /// Sequences per rank.
        #[arg(long, default_value_t = 8, value_parser = at_least_1)]
        batch: usize,
        /// Gradient dtype on the wire: auto (the model's), fp32 (as PyTorch autocast
        /// does), bf16 (an fp32 model too: PyTorch's bf16_compress_hook).
        #[arg(long, value_enum, default_value = "auto")]
        grads: crate::ddp::GradComm,
        /// SMs the backward's GEMMs leave to NCCL (cublasSetSmCountTarget), one run per
        /// value; 0 = every SM.
        #[arg(long, value_delimiter = ',', default_value = "0")]
        sm_carveout: Vec<usize>,
        /// Launch the buckets that become ready at one stage as one NCCL group, one run
        /// per value (false,true runs both).
        #[arg(long, value_delimiter = ',', default_value = "false")]
        coalesce: Vec<bool>,
        /// Capture each step (the 1-GPU steps and the DDP step, collectives included) as
        /// one CUDA graph after an eager step; `false` for eager steps.
        #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
        graph: bool,
        /// Clip the gradients to this global norm, as `train` does (0: off).
        #[arg(long, default_value_t = 0.0)]
        clip: f64,
        /// Trace one extra step per strategy (CUDA events on both streams) and write
        /// Chrome trace JSON files here; records get the overlap ratio (NCCL only).
        #[arg(long)]
        trace_dir: Option<PathBuf>,
        #[arg(long, default_value = "report/results.jsonl")]
        out: PathBuf,
    },
    /// Optimizer-state sharding: DDP vs ShardedOptimizer vs Zero1, step time and memory.
    Zero1 {
        #[arg(long, value_enum, default_value = "auto")]
        backend: BackendArg,
        #[arg(long, default_value_t = 2, value_parser = ranks)]
        ranks: usize,
        #[arg(long, default_value = "tiny")]
        size: String,
        /// The model's compute dtypes (bf16: bf16 GEMMs and weight copies, f32 masters).
        #[arg(long, value_enum, value_delimiter = ',', default_value = "fp32")]
        dtype: Vec<single::Precision>,
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "ddp,sharded,zero1,zero1-overlap,zero1-ahead,zero2"
        )]
        modes: Vec<String>,
        /// DDP's bucket size for the ddp, sharded and zero1-overlap/-ahead modes.
        #[arg(long, default_value_t = 25.0, value_parser = positive_mb)]
        bucket_mb: f64,
        /// SMs the backward's GEMMs leave to NCCL in those modes (0: every SM).
        #[arg(long, default_value_t = 0)]
        sm_carveout: usize,
        /// Reduce-scatter the buckets ready at one stage as one NCCL group
        /// (zero1-overlap/-ahead).
        #[arg(long)]
        coalesce: bool,
        #[arg(long, default_value_t = 2, value_parser = warmup)]
        warmup: usize,
        #[arg(long, default_value_t = 5, value_parser = steps)]
        steps: usize,
        #[arg(long, default_value_t = 8, value_parser = at_least_1)]
        batch: usize,
        /// Time the step captured as one CUDA graph after an eager step (CUDA only);
        /// `false` for eager steps. Memory is read from eager steps either way.
        #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
        graph: bool,
        #[arg(long, default_value = "report/results.jsonl")]
        out: PathBuf,
    },
    /// DDP on the backend against one process (`ddp_check`): step 0's gradients, then the
    /// weights after the steps, every rank equal.
    DdpCheck(crate::ddp_check::Args),
    /// ZeRO-1 checkpoint on the backend: resumed (other buckets) = uninterrupted = single
    /// process, tiny LM.
    Zero1Check {
        #[arg(long, value_enum, default_value = "auto")]
        backend: BackendArg,
        /// Ranks (CPU threads, or GPUs); under a launcher (RANK set) the launcher's
        /// WORLD_SIZE processes instead, for cpu as for nccl.
        #[arg(long, default_value_t = 2, value_parser = ranks)]
        ranks: usize,
        #[arg(long, default_value_t = 6, value_parser = steps)]
        steps: usize,
        /// Save after this many steps, then resume there.
        #[arg(long, default_value_t = 3, value_parser = steps)]
        save_at: usize,
        /// Sequences of the tiny LM per step over all ranks (divisible by --ranks; at most
        /// 4096).
        #[arg(long, default_value_t = 8, value_parser = check_batch)]
        global_batch: usize,
        /// Checkpoint directory (shared by the ranks): new or empty, never a non-empty one;
        /// the checkpoint is removed after a passing check, kept after a failing one.
        #[arg(long, default_value = "report/zero1-check-ckpt")]
        dir: PathBuf,
        /// Largest |w_resumed - w_straight| accepted (finite, >= 0).
        #[arg(long, default_value_t = 1e-6)]
        tol: f32,
    },
    /// A tiny LM on GPU 0 against the CPU: loss and gradients, fp32 and bf16.
    ModelCheck,
    /// The clipping norm's pass alone: gradients shaped as LM `size`'s parameters, each
    /// kernel layout timed (GPU 0).
    Gradnorm {
        #[arg(long, default_value = "xl")]
        size: String,
        #[arg(long, default_value = "bf16")]
        dtype: single::Precision,
        #[arg(long, default_value_t = 50, value_parser = steps)]
        iters: usize,
        /// JSON lines are appended here.
        #[arg(long, default_value = "report/results.jsonl")]
        out: PathBuf,
    },
    /// RMSNorm micro-benchmark: fused vs composed vs LayerNorm, 50,000 rows (GPU 0).
    Rmsnorm {
        #[arg(long, default_value_t = 50_000, value_parser = at_least_1)]
        rows: usize,
        #[arg(long, default_value_t = 20, value_parser = steps)]
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
        /// Run on the CPU (wall clock between marks; without it: GPU 0 where built with CUDA
        /// and one is visible, else the CPU, saying why).
        #[arg(long)]
        cpu: bool,
    },
    /// The forward or the backward on one GPU while a kernel beside it holds some SMs (as
    /// NCCL's do), with and without the GEMM SM carve-out.
    Contention {
        #[arg(long, value_delimiter = ',', default_value = "xl")]
        size: Vec<String>,
        #[arg(long, value_enum, value_delimiter = ',', default_value = "fp32")]
        dtype: Vec<single::Precision>,
        /// What the hog does with its SMs: spin (occupy them) or stream (copy memory).
        #[arg(long, value_enum, value_delimiter = ',', default_value = "spin,stream")]
        hog: Vec<crate::contention::HogKind>,
        /// SMs the hog kernel holds (0: none).
        #[arg(long, value_delimiter = ',', default_value = "0,16,32")]
        hog_sms: Vec<usize>,
        /// SMs cuBLAS leaves out of its GEMM plans (0: none).
        #[arg(long, value_delimiter = ',', default_value = "0,16,32")]
        sm_carveout: Vec<usize>,
        /// The pass timed beside the hog.
        #[arg(long, value_enum, default_value = "backward")]
        phase: crate::contention::Phase,
        /// The hog holds its SMs for this share of the timed pass alone.
        #[arg(long, default_value_t = 0.5)]
        hog_share: f64,
        #[arg(long, default_value_t = 2, value_parser = warmup)]
        warmup: usize,
        #[arg(long, default_value_t = 5, value_parser = steps)]
        steps: usize,
        #[arg(long, default_value_t = 8, value_parser = at_least_1)]
        batch: usize,
        #[arg(long, default_value = "report/results.jsonl")]
        out: PathBuf,
    },
    /// Where an overlapped DDP step loses its time: each trace's stages against the base
    /// trace's (a naive step, whose backward runs with no communication beside it).
    Slowdown {
        /// The base trace (`bench ddp --trace-dir`'s trace-SIZE-DTYPE-naive.json).
        #[arg(long)]
        base: PathBuf,
        /// The strategies' traces to compare with it.
        #[arg(required = true)]
        traces: Vec<PathBuf>,
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

//! `bench`'s subcommands and their flags (clap); the flags' parsers are in [`crate::cli`].

use crate::cli::{at_least_1, check_batch, positive_mb, ranks, steps, warmup, BackendArg};
use crate::{report, single};
use clap::Subcommand;
use std::path::PathBuf;

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

/// `--dtype` of the benchmarks that run each of several compute dtypes.
#[derive(clap::Args)]
pub struct Dtypes {
    /// Compute dtypes, comma-separated, one run each: fp32, or bf16 (bf16 GEMMs and weight
    /// copies, f32 masters).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "fp32")]
    pub dtype: Vec<single::Precision>,
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
        #[command(flatten)]
        dtype: Dtypes,
        /// What is timed: fwd (the forward), fwd-bwd (forward and backward), step (forward,
        /// backward and AdamW: the training step).
        #[arg(long, value_enum, default_value = "step")]
        mode: single::Mode,
        /// Untimed steps before the timed ones (with --graph at least 2 run: one eager step,
        /// then the capture).
        #[arg(long, default_value_t = 3, value_parser = warmup)]
        warmup: usize,
        /// Timed steps; the record holds their mean, standard deviation and median.
        #[arg(long, default_value_t = 10, value_parser = steps)]
        steps: usize,
        /// Sequences per step, each of the model's context.
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
        /// JSON lines are appended here.
        #[arg(long, default_value = "report/results.jsonl")]
        out: PathBuf,
    },
    /// DDP strategies (naive, flat, overlap, bucketed sweep): step, compute, communication
    /// and exposed communication time, against this GPU alone.
    Ddp {
        /// Where the ranks run: nccl (a process per GPU), cpu, or auto.
        #[arg(long, value_enum, default_value = "auto")]
        backend: BackendArg,
        /// Ranks: GPUs (one process each) or CPU threads.
        #[arg(long, default_value_t = 2, value_parser = ranks)]
        ranks: usize,
        /// Model sizes, comma-separated (tiny, small, medium, large, xl, 2.7B, 6.7B, 13B).
        #[arg(long, value_delimiter = ',', default_value = "small")]
        size: Vec<String>,
        #[command(flatten)]
        dtype: Dtypes,
        /// naive, flat, overlap, bucketed (expanded over --buckets-mb), bucketed:MB.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "naive,flat,overlap,bucketed"
        )]
        strategies: Vec<String>,
        /// Bucket sizes in MiB that `bucketed` expands to, one run each.
        #[arg(long, value_delimiter = ',', value_parser = positive_mb, default_values_t = [1.0, 5.0, 10.0, 25.0, 50.0, 100.0, 500.0, 1000.0])]
        buckets_mb: Vec<f64>,
        /// Untimed steps before the timed ones (at least 2 run: one eager step, then the
        /// capture and its first replay).
        #[arg(long, default_value_t = 2, value_parser = warmup)]
        warmup: usize,
        /// Timed steps per strategy.
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
        /// JSON lines are appended here.
        #[arg(long, default_value = "report/results.jsonl")]
        out: PathBuf,
    },
    /// Optimizer-state sharding: DDP vs ShardedOptimizer vs Zero1, step time and memory.
    Zero1 {
        /// Where the ranks run: nccl (a process per GPU), cpu, or auto.
        #[arg(long, value_enum, default_value = "auto")]
        backend: BackendArg,
        /// Ranks: GPUs (one process each) or CPU threads.
        #[arg(long, default_value_t = 2, value_parser = ranks)]
        ranks: usize,
        /// The model (tiny, small, medium, large, xl, 2.7B, 6.7B, 13B).
        #[arg(long, default_value = "tiny")]
        size: String,
        #[command(flatten)]
        dtype: Dtypes,
        /// Modes, one run each: ddp (bucketed all-reduce), sharded (all-reduce, then each
        /// owner's AdamW and a broadcast), zero1 (one reduce-scatter after the backward),
        /// zero1-overlap (a reduce-scatter per bucket in the backward), zero1-ahead (and the
        /// all-gathers beside the next forward), zero2 (zero1-ahead, each bucket's gradients
        /// freed once reduced).
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
        /// Untimed steps before the timed ones (at least 2 run: one eager step, then the
        /// capture and its first replay).
        #[arg(long, default_value_t = 2, value_parser = warmup)]
        warmup: usize,
        /// Timed steps per mode.
        #[arg(long, default_value_t = 5, value_parser = steps)]
        steps: usize,
        /// Sequences per rank.
        #[arg(long, default_value_t = 8, value_parser = at_least_1)]
        batch: usize,
        /// Time the step captured as one CUDA graph after an eager step (CUDA only);
        /// `false` for eager steps. Memory is read from eager steps either way.
        #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
        graph: bool,
        /// JSON lines are appended here.
        #[arg(long, default_value = "report/results.jsonl")]
        out: PathBuf,
    },
    /// DDP on the backend against one process (`ddp_check`): step 0's gradients, then the
    /// weights after the steps, every rank equal.
    DdpCheck(crate::ddp_check::Args),
    /// ZeRO-1 checkpoint on the backend: resumed (other buckets) = uninterrupted = single
    /// process, tiny LM.
    Zero1Check {
        /// Where the ranks run: nccl (a process per GPU), cpu, or auto.
        #[arg(long, value_enum, default_value = "auto")]
        backend: BackendArg,
        /// Ranks (CPU threads, or GPUs); under a launcher (RANK set) the launcher's
        /// WORLD_SIZE processes instead, for cpu as for nccl.
        #[arg(long, default_value_t = 2, value_parser = ranks)]
        ranks: usize,
        /// Steps in all; the checkpoint is saved after --save-at of them.
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
    /// AdamW's fused update alone: parameters shaped as LM `size`'s, one launch per tensor,
    /// up to 64 tensors a launch (the step's) and one over a flat buffer, beside a
    /// device-to-device copy's rate (GPU 0).
    Adamw {
        /// The model whose parameters are updated (tiny, small, medium, large, xl, 2.7B,
        /// 6.7B, 13B).
        #[arg(long, default_value = "xl")]
        size: String,
        /// Timed updates of each layout.
        #[arg(long, default_value_t = 20, value_parser = steps)]
        iters: usize,
        /// JSON lines are appended here.
        #[arg(long, default_value = "report/results.jsonl")]
        out: PathBuf,
    },
    /// The clipping norm's pass alone: gradients shaped as LM `size`'s parameters, each
    /// kernel layout timed (GPU 0).
    Gradnorm {
        /// The model whose parameters the gradients are shaped as (tiny, small, medium, large,
        /// xl, 2.7B, 6.7B, 13B).
        #[arg(long, default_value = "xl")]
        size: String,
        /// The gradients' dtype (fp32, bf16).
        #[arg(long, default_value = "bf16")]
        dtype: single::Precision,
        /// Timed passes of each kernel layout.
        #[arg(long, default_value_t = 50, value_parser = steps)]
        iters: usize,
        /// JSON lines are appended here.
        #[arg(long, default_value = "report/results.jsonl")]
        out: PathBuf,
    },
    /// RMSNorm micro-benchmark: fused vs composed vs LayerNorm, 50,000 rows (GPU 0).
    Rmsnorm {
        /// Rows of each width (1024, 2048, 4096, 8192).
        #[arg(long, default_value_t = 50_000, value_parser = at_least_1)]
        rows: usize,
        /// Timed passes of each kernel after a warm-up; their mean is recorded.
        #[arg(long, default_value_t = 20, value_parser = steps)]
        iters: usize,
        /// JSON lines are appended here.
        #[arg(long, default_value = "report/results.jsonl")]
        out: PathBuf,
    },
    /// GPU time and memory per component of one step (CUDA events at the model's marks):
    /// table, JSON lines, flame graph and memory timeline SVGs.
    Profile {
        /// Model sizes, comma-separated (tiny, small, medium, large, xl, 2.7B, 6.7B, 13B).
        #[arg(long, value_delimiter = ',', default_value = "xl")]
        size: Vec<String>,
        #[command(flatten)]
        dtype: Dtypes,
        /// fwd (forward only) or step (forward, backward, AdamW).
        #[arg(long, value_delimiter = ',', default_value = "step")]
        mode: Vec<String>,
        /// Tokens a sequence (8 sequences; the size's own, 128, unless given).
        #[arg(long)]
        context: Option<usize>,
        /// JSON lines are appended here.
        #[arg(long, default_value = "report/results.jsonl")]
        out: PathBuf,
        /// The flame graph and memory timeline SVGs are written here.
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
        /// Model sizes, comma-separated (tiny, small, medium, large, xl, 2.7B, 6.7B, 13B).
        #[arg(long, value_delimiter = ',', default_value = "xl")]
        size: Vec<String>,
        #[command(flatten)]
        dtype: Dtypes,
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
        /// Untimed passes before the timed ones.
        #[arg(long, default_value_t = 2, value_parser = warmup)]
        warmup: usize,
        /// Timed passes per case.
        #[arg(long, default_value_t = 5, value_parser = steps)]
        steps: usize,
        /// Sequences per pass.
        #[arg(long, default_value_t = 8, value_parser = at_least_1)]
        batch: usize,
        /// JSON lines are appended here.
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
        /// The run's JSON lines.
        #[arg(long, default_value = "report/results.jsonl")]
        results: PathBuf,
        /// PyTorch anchor lines from the same run (optional).
        #[arg(long)]
        torch: Option<PathBuf>,
        /// report.md and the plots are written here.
        #[arg(long, default_value = "report")]
        out: PathBuf,
        /// IsoFLOPs runs for the scaling-law section (relative paths are also looked up
        /// from the workspace root); the section is skipped when the file is absent.
        #[arg(long, default_value = report::DEFAULT_ISOFLOPS)]
        isoflops: PathBuf,
    },
}

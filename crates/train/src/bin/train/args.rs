//! `train`'s command line: the subcommands and their flags (clap), each flag's help
//! its doc comment. main.rs turns them into a run's configuration.

use clap::{Args, FromArgMatches, Parser, Subcommand};
use std::path::PathBuf;
use train::launch::Backend;

#[derive(Parser)]
#[command(about = "Train a Transformer LM end to end: data, training, checkpoints, samples")]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Subcommand)]
pub enum Cmd {
    /// Tokenize the embedded story corpus (or --text) into a data directory.
    Prepare(Prep),
    /// Train (resumes from the newest complete checkpoint in --out unless --fresh).
    Run(Box<Run>),
    /// Continue prompts with the model of a checkpoint.
    Sample(Sample),
    /// Compare two logs (ours and another trainer's, same schema): |Δ loss| by step,
    /// compare.json and the curves overlaid in compare.svg.
    Compare(Compare),
}

#[derive(Args)]
pub struct Compare {
    /// Our log.jsonl.
    pub ours: PathBuf,
    /// The other trainer's log (e.g. scripts/anchors/torch_train.py's).
    pub theirs: PathBuf,
    /// The directory compare.json and compare.svg are written to.
    #[arg(long, default_value = "compare")]
    pub out: PathBuf,
    /// The mean |Δ train loss| is taken over the last this many common steps.
    #[arg(long, default_value_t = 200)]
    pub last: usize,
    /// Legends of the two logs.
    #[arg(long, default_value = "ours,torch")]
    pub labels: String,
}

#[derive(Args)]
pub struct Prep {
    /// The data directory to write: meta.json, tokenizer.json, train.bin and val.bin.
    #[arg(long, default_value = "data/stories")]
    pub data: PathBuf,
    /// A text file (documents separated by blank lines) instead of the embedded stories.
    #[arg(long)]
    pub text: Option<PathBuf>,
    /// The BPE tokenizer's vocabulary, at most (a small corpus yields fewer tokens).
    #[arg(long, default_value_t = 10_000)]
    pub vocab: usize,
    /// Size of the generated corpus in bytes.
    #[arg(long, default_value_t = 4 << 20)]
    pub bytes: usize,
    /// The generated corpus's seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

impl Prep {
    /// `train prepare --data DATA`, every other flag at its default (what `run --prepare`
    /// does): the defaults are the flags' own, parsed from no arguments, not written again
    /// here; `data` is set after, so no path can be read as a flag.
    pub fn with_defaults(data: &std::path::Path) -> clap::error::Result<Self> {
        let cmd = Prep::augment_args(clap::Command::new("prepare"));
        let mut p = Prep::from_arg_matches(&cmd.try_get_matches_from(["prepare"])?)?;
        p.data = data.to_path_buf();
        Ok(p)
    }
}

#[derive(Args)]
pub struct Run {
    /// A data directory made by `train prepare` (or --prepare).
    #[arg(long, default_value = "data/stories")]
    pub data: PathBuf,
    /// Prepare the data directory from the embedded corpus first if it has no meta.json.
    #[arg(long)]
    pub prepare: bool,
    /// The run directory: log.jsonl, loss.svg, samples.txt, config.json, checkpoints/.
    #[arg(long, default_value = "runs/default")]
    pub out: PathBuf,
    /// nano, micro, mini (for CPUs), or small, medium, large, xl, 2.7B, 6.7B, 13B.
    #[arg(long, default_value = "nano")]
    pub model: String,
    /// A JSON model shape {d_model, layers, heads, d_ff, context} instead of --model.
    #[arg(long, conflicts_with_all = ["model", "context"])]
    pub model_config: Option<PathBuf>,
    /// Tokens a window (the model's context) instead of the size's.
    #[arg(long)]
    pub context: Option<usize>,
    /// Compute in bf16: activations and gradients in bf16, the weights cast from their f32
    /// masters (on GPUs, bf16 copies that AdamW writes); AdamW in f32. f32 throughout
    /// otherwise.
    #[arg(long)]
    pub bf16: bool,
    /// zero1 or zero1:MB (the default; ZeRO-1: reduce-scatter, sharded AdamW, all-gather;
    /// buckets of MB, 400 by default; on one rank the single step), single, naive, flat,
    /// overlap, bucketed:MB (DDP), zero2[:MB] (its gradients freed once scattered),
    /// fsdp[:MB] (ZeRO-3: the f32 masters and the bf16 copies sharded too, gathered stage by
    /// stage; bf16 on GPUs), sharded (all-reduce, then the broadcast sharded optimizer).
    #[arg(long, default_value = "zero1")]
    pub strategy: String,
    /// auto: the GPU (NCCL) where built with CUDA and one is visible, else the CPU; cpu;
    /// nccl. The run says which it took.
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: Backend,
    /// CPU ranks as threads (ignored under a launcher, which sets WORLD_SIZE); on the GPU
    /// without a launcher, 1: one GPU in this process.
    #[arg(long, default_value_t = 1)]
    pub world: usize,
    /// Optimizer steps in the run (the schedule's length).
    #[arg(long, default_value_t = 1000)]
    pub steps: u64,
    /// Windows a step, over every rank and micro-batch: each rank takes
    /// global-batch ÷ (world × accum) a micro-batch.
    #[arg(long, default_value_t = 16)]
    pub global_batch: usize,
    /// Micro-batches a step: their gradients are summed on each rank and reduced once,
    /// after the last.
    #[arg(long, default_value_t = 1)]
    pub accum: usize,
    /// Activation checkpointing: each block keeps only its input from the forward and runs
    /// its forward again right before its backward (torchtitan's full activation
    /// checkpointing): one block's activations held at a time instead of every block's,
    /// for a third more compute; the same gradients (bit for bit where checked: the CPU,
    /// GPUs at 128 tokens).
    #[arg(long)]
    pub activation_checkpointing: bool,
    /// The learning rate after the warm-up; a cosine takes it down to --min-lr at --steps.
    #[arg(long, default_value_t = 3e-3)]
    pub lr: f64,
    /// The learning rate the cosine ends at, at --steps.
    #[arg(long, default_value_t = 3e-4)]
    pub min_lr: f64,
    /// Steps of linear warm-up to --lr.
    #[arg(long, default_value_t = 50)]
    pub warmup: u64,
    /// AdamW's decoupled weight decay, on every parameter.
    #[arg(long, default_value_t = 0.1)]
    pub weight_decay: f64,
    /// AdamW's β1 (the first moment's decay).
    #[arg(long, default_value_t = 0.9)]
    pub beta1: f64,
    /// AdamW's β2 (the second moment's decay).
    #[arg(long, default_value_t = 0.95)]
    pub beta2: f64,
    /// Clip the gradient's global norm (the whole model's, after the reduction) to this;
    /// 0: no clipping.
    #[arg(long, default_value_t = 1.0)]
    pub clip: f64,
    /// Evaluate the validation loss before the first step, every N steps, and at the last.
    #[arg(long, default_value_t = 100)]
    pub eval_every: u64,
    /// Validation batches (fixed windows, the same at every evaluation).
    #[arg(long, default_value_t = 8)]
    pub eval_batches: usize,
    /// A checkpoint every N steps, or every so many minutes of training (30m; also 90s,
    /// 2h), the step agreed by every rank.
    #[arg(long, default_value = "200")]
    pub ckpt_every: train::cadence::Cadence,
    /// Checkpoints kept (the newest).
    #[arg(long, default_value_t = 3)]
    pub keep: usize,
    /// Skip up to N steps in a row whose loss or gradient norm is not finite (AdamW writes
    /// nothing for them, as Megatron skips an iteration); 0: such a step stops the run.
    #[arg(long, default_value_t = 0)]
    pub skip_nonfinite: u64,
    /// Compute with another run's GEMM algorithms (its gemm-choices.json; CUDA): that run's
    /// bits. By default a run keeps its own table in --out, which a resume takes back.
    #[arg(long)]
    pub gemm_choices: Option<PathBuf>,
    /// The initial weights', the training windows' and the samples' seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Start from scratch even if --out holds checkpoints (the previous run moved aside;
    /// under a launcher's restarts or a Slurm requeue, the job's first start only: a restart
    /// resumes).
    #[arg(long)]
    pub fresh: bool,
    /// Stop after this many steps as if killed (tests resume).
    #[arg(long)]
    pub stop_after: Option<u64>,
    /// No progress bar (the log and the summary are written as ever).
    #[arg(long)]
    pub no_progress: bool,
    /// Run every step eagerly instead of as one CUDA graph: slower; the steps a graph's
    /// are checked against.
    #[arg(long)]
    pub eager: bool,
    /// Also write the initial weights to OUT/init.safetensors (OUT/config.json is always
    /// written): what scripts/anchors/torch_train.py starts from.
    #[arg(long)]
    pub export_init: bool,
    #[command(flatten)]
    pub gen: Gen,
}

#[derive(Args, Clone)]
pub struct Gen {
    /// Tokens generated a sample, at most (a sample ends at its end-of-text token).
    #[arg(long, default_value_t = 60)]
    pub max_new: usize,
    /// Sampling temperature; 0: greedy (the most likely token).
    #[arg(long, default_value_t = 0.8)]
    pub temperature: f64,
    /// Sample among the k most likely tokens; 0: among all.
    #[arg(long, default_value_t = 20)]
    pub top_k: usize,
}

#[derive(Args)]
pub struct Sample {
    /// The data directory the run trained on (its tokenizer).
    #[arg(long, default_value = "data/stories")]
    pub data: PathBuf,
    /// A run directory (its newest complete checkpoint) or a step directory.
    #[arg(long, default_value = "runs/default")]
    pub out: PathBuf,
    /// A prompt to continue (repeat the flag for more); the built-in prompts if none.
    #[arg(long)]
    pub prompt: Vec<String>,
    /// The sampling seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[command(flatten)]
    pub gen: Gen,
}

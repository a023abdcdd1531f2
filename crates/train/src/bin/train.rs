//! `train`: prepare data, train the Transformer LM on one or many ranks, sample from it.
//!
//!   train prepare --data data/stories                       embedded corpus → tokenizer, .bin
//!   train run --data data/stories --out runs/demo --world 2 DDP on 2 CPU threads
//!   comm-launch --nproc-per-node 2 -- train run --data … --out …  (2 CPU processes)
//!   train sample --data data/stories --out runs/demo        continue prompts from a checkpoint
//!   train compare runs/demo/log.jsonl torch.jsonl --out cmp  two trainers' logs: |Δ loss|, curves

use anyhow::{bail, Context, Result};
use candle_core::Device;
use clap::{Args, Parser, Subcommand};
use std::io::Write;
use std::path::PathBuf;
use train::config::{shape_by_name, shape_from_file, TrainConfig};
use train::data::{self, Source};
use train::generate::{self, SampleOpts};
use train::launch::{self, Backend};
use train::rng::SplitMix64;
use train::trainer::{run_rank, RunOpts};

#[derive(Parser)]
#[command(about = "Train a Transformer LM end to end: data, training, checkpoints, samples")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
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
struct Compare {
    /// Our log.jsonl.
    ours: PathBuf,
    /// The other trainer's log (e.g. scripts/anchors/torch_train.py's).
    theirs: PathBuf,
    #[arg(long, default_value = "compare")]
    out: PathBuf,
    /// The mean |Δ train loss| is taken over the last this many common steps.
    #[arg(long, default_value_t = 200)]
    last: usize,
    /// Legends of the two logs.
    #[arg(long, default_value = "ours,torch")]
    labels: String,
}

#[derive(Args)]
struct Prep {
    #[arg(long, default_value = "data/stories")]
    data: PathBuf,
    /// A text file (documents separated by blank lines) instead of the embedded stories.
    #[arg(long)]
    text: Option<PathBuf>,
    #[arg(long, default_value_t = 10_000)]
    vocab: usize,
    /// Size of the generated corpus in bytes.
    #[arg(long, default_value_t = 4 << 20)]
    bytes: usize,
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

#[derive(Args)]
struct Run {
    #[arg(long, default_value = "data/stories")]
    data: PathBuf,
    /// Prepare the data directory from the embedded corpus first if it has no meta.json.
    #[arg(long)]
    prepare: bool,
    #[arg(long, default_value = "runs/default")]
    out: PathBuf,
    /// nano, micro, mini (for CPUs), or small, medium, large, xl, 2.7B, 6.7B, 13B.
    #[arg(long, default_value = "nano")]
    model: String,
    /// A JSON model shape {d_model, layers, heads, d_ff, context} instead of --model.
    #[arg(long)]
    model_config: Option<PathBuf>,
    #[arg(long)]
    context: Option<usize>,
    #[arg(long)]
    bf16: bool,
    /// zero1 or zero1:MB (the default; ZeRO-1: reduce-scatter, sharded AdamW, all-gather;
    /// buckets of MB, 400 by default; on one rank the single step), single, naive, flat,
    /// overlap, bucketed:MB (DDP), zero2[:MB] (its gradients freed once scattered),
    /// fsdp[:MB] (ZeRO-3: the f32 masters and the bf16 copies sharded too, gathered stage by
    /// stage; bf16 on GPUs), sharded (all-reduce, then the broadcast sharded optimizer).
    #[arg(long, default_value = "zero1")]
    strategy: String,
    /// auto: the GPU (NCCL) where built with CUDA and one is visible, else the CPU; cpu;
    /// nccl. The run says which it took.
    #[arg(long, value_enum, default_value = "auto")]
    backend: Backend,
    /// CPU ranks as threads (ignored under a launcher, which sets WORLD_SIZE); on the GPU
    /// without a launcher, 1: one GPU in this process.
    #[arg(long, default_value_t = 1)]
    world: usize,
    #[arg(long, default_value_t = 1000)]
    steps: u64,
    #[arg(long, default_value_t = 16)]
    global_batch: usize,
    #[arg(long, default_value_t = 1)]
    accum: usize,
    #[arg(long, default_value_t = 3e-3)]
    lr: f64,
    #[arg(long, default_value_t = 3e-4)]
    min_lr: f64,
    #[arg(long, default_value_t = 50)]
    warmup: u64,
    #[arg(long, default_value_t = 0.1)]
    weight_decay: f64,
    #[arg(long, default_value_t = 0.9)]
    beta1: f64,
    #[arg(long, default_value_t = 0.95)]
    beta2: f64,
    #[arg(long, default_value_t = 1.0)]
    clip: f64,
    #[arg(long, default_value_t = 100)]
    eval_every: u64,
    #[arg(long, default_value_t = 8)]
    eval_batches: usize,
    /// A checkpoint every N steps, or every so many minutes of training (30m; also 90s,
    /// 2h), the step agreed by every rank.
    #[arg(long, default_value = "200")]
    ckpt_every: train::cadence::Cadence,
    /// Checkpoints kept (the newest).
    #[arg(long, default_value_t = 3)]
    keep: usize,
    /// Skip up to N steps in a row whose loss or gradient norm is not finite (AdamW writes
    /// nothing for them, as Megatron skips an iteration); 0: such a step stops the run.
    #[arg(long, default_value_t = 0)]
    skip_nonfinite: u64,
    /// Compute with another run's GEMM algorithms (its gemm-choices.json; CUDA): that run's
    /// bits. By default a run keeps its own table in --out, which a resume takes back.
    #[arg(long)]
    gemm_choices: Option<PathBuf>,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Start from scratch even if --out holds checkpoints.
    #[arg(long)]
    fresh: bool,
    /// Stop after this many steps as if killed (tests resume).
    #[arg(long)]
    stop_after: Option<u64>,
    #[arg(long)]
    no_progress: bool,
    /// Run every step eagerly instead of as one CUDA graph: slower; the steps a graph's
    /// are checked against.
    #[arg(long)]
    eager: bool,
    /// Also write the initial weights to OUT/init.safetensors (OUT/config.json is always
    /// written): what scripts/anchors/torch_train.py starts from.
    #[arg(long)]
    export_init: bool,
    #[command(flatten)]
    gen: Gen,
}

#[derive(Args, Clone)]
struct Gen {
    #[arg(long, default_value_t = 60)]
    max_new: usize,
    #[arg(long, default_value_t = 0.8)]
    temperature: f64,
    #[arg(long, default_value_t = 20)]
    top_k: usize,
}

#[derive(Args)]
struct Sample {
    #[arg(long, default_value = "data/stories")]
    data: PathBuf,
    /// A run directory (its newest complete checkpoint) or a step directory.
    #[arg(long, default_value = "runs/default")]
    out: PathBuf,
    #[arg(long)]
    prompt: Vec<String>,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[command(flatten)]
    gen: Gen,
}

fn opts(g: &Gen) -> Result<SampleOpts> {
    if !(g.temperature.is_finite() && g.temperature >= 0.0) {
        bail!(
            "--temperature {}: a finite number >= 0 (0: greedy, the most likely token)",
            g.temperature
        );
    }
    Ok(SampleOpts {
        max_new: g.max_new,
        temperature: g.temperature,
        top_k: g.top_k,
    })
}

fn prepare(p: &Prep) -> Result<()> {
    let src = match &p.text {
        Some(t) => Source::Text(t),
        None => Source::Stories {
            seed: p.seed,
            bytes: p.bytes,
        },
    };
    let m = data::prepare(&p.data, src, p.vocab)?;
    println!(
        "prepared {}: {} tokens in the vocabulary, {} train and {} validation tokens; unigram entropy {:.4} nats/token",
        p.data.display(), m.vocab_size, m.train_tokens, m.val_tokens, m.unigram_entropy
    );
    Ok(())
}

/// The run's configuration and options from its flags (and the data prepared where asked
/// and missing); every error here is the user's.
fn run_config(a: &Run) -> Result<(TrainConfig, RunOpts)> {
    if a.prepare && !a.data.join("meta.json").exists() {
        prepare(&Prep {
            data: a.data.clone(),
            text: None,
            vocab: 10_000,
            bytes: 4 << 20,
            seed: 0,
        })?;
    }
    let model = match &a.model_config {
        Some(f) => shape_from_file(f)?,
        None => shape_by_name(&a.model, a.context)?,
    };
    let c = TrainConfig {
        model,
        bf16: a.bf16,
        strategy: a.strategy.clone(),
        steps: a.steps,
        global_batch: a.global_batch,
        accum: a.accum,
        lr: a.lr,
        min_lr: a.min_lr,
        warmup: a.warmup,
        weight_decay: a.weight_decay,
        beta1: a.beta1,
        beta2: a.beta2,
        clip: a.clip,
        eval_every: a.eval_every,
        eval_batches: a.eval_batches,
        seed: a.seed,
    };
    if a.keep == 0 {
        bail!("--keep 0: at least the newest checkpoint is kept (--keep 1)");
    }
    if let Some(f) = a.gemm_choices.as_ref().filter(|f| !f.is_file()) {
        bail!("--gemm-choices {}: no such file", f.display());
    }
    let o = RunOpts {
        data: a.data.clone(),
        out: a.out.clone(),
        ckpt_every: a.ckpt_every,
        keep: a.keep,
        resume: !a.fresh,
        stop_after: a.stop_after,
        progress: !a.no_progress,
        samples: Some(opts(&a.gen)?),
        export_init: a.export_init,
        skip_nonfinite: a.skip_nonfinite,
        gemm_choices: a.gemm_choices.clone(),
        eager: a.eager,
    };
    Ok((c, o))
}

fn run(a: &Run) -> Result<()> {
    let (c, o) = train::users(run_config(a))?;
    // SIGTERM/SIGINT/SIGHUP from now on stop every rank after a checkpoint (the ranks
    // agree on the step), instead of killing the process mid-step.
    let _signals = comm::launch::signals::install()?;
    let existed = a.out.exists();
    let s = launch::run(a.backend, a.world, |comm, dev| run_rank(&c, &o, comm, dev)).inspect_err(
        |_| {
            if !existed {
                // A run that failed at its start leaves no empty --out behind.
                train::rundir::remove_if_unused(&a.out);
            }
        },
    )?;
    if let Some(s) = s {
        println!("{}", s.line());
        for (p, t) in &s.samples {
            println!("--- {p}{t}");
        }
        let mut wrote: Vec<String> = ["log.jsonl", "loss.svg", "samples.txt", "config.json"]
            .iter()
            .chain(a.export_init.then_some(&"init.safetensors"))
            .map(|f| a.out.join(f))
            .filter(|p| p.is_file())
            .map(|p| p.display().to_string())
            .collect();
        let ckpts = a.out.join("checkpoints");
        if std::fs::read_dir(&ckpts).is_ok_and(|mut d| d.next().is_some()) {
            wrote.push(format!("{}/", ckpts.display()));
        }
        println!("files: {}", wrote.join(", "));
    }
    Ok(())
}

fn sample(a: &Sample) -> Result<()> {
    let gen = opts(&a.gen)?;
    let dir = train::load::step_dir(&a.out)?;
    let ds = data::Dataset::open(&a.data)?;
    let dev = Device::Cpu;
    let (m, _) = train::load::model(&dir, ds.meta.vocab_size, &dev)?;
    let prompts: Vec<String> = if a.prompt.is_empty() {
        generate::PROMPTS.iter().map(|s| s.to_string()).collect()
    } else {
        a.prompt.clone()
    };
    let mut rng = SplitMix64::new(a.seed);
    // Written, not println!: a reader that stops early (`| head -1`) ends the output,
    // not the program with a panic.
    let mut so = std::io::stdout().lock();
    let mut say = |line: String| match writeln!(so, "{line}") {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        r => r.map(|_| true).context("writing to stdout"),
    };
    if !say(format!("checkpoint {}", dir.display()))? {
        return Ok(());
    }
    for p in prompts {
        let t = generate::continue_text(
            &m,
            &ds.tokenizer,
            ds.meta.eot,
            (&p, &gen),
            &mut rng,
            &dev,
            |_| Ok(()),
        )?;
        if !say(format!("--- {p}{t}"))? {
            break;
        }
    }
    Ok(())
}

fn compare(a: &Compare) -> Result<()> {
    let labels: Vec<&str> = a.labels.split(',').collect();
    let [x, y] = labels[..] else {
        bail!(
            "--labels takes two names separated by a comma, not {:?}",
            a.labels
        );
    };
    let c = train::compare::write([&a.ours, &a.theirs], [x, y], a.last, &a.out)?;
    print!("{}", c.summary());
    println!("wrote {0}/compare.json, {0}/compare.svg", a.out.display());
    Ok(())
}

fn main() {
    let r = match Cli::parse().cmd {
        Cmd::Prepare(p) => train::users(prepare(&p)),
        Cmd::Run(a) => run(&a),
        Cmd::Sample(s) => sample(&s),
        Cmd::Compare(c) => compare(&c),
    };
    if let Err(e) = r {
        eprintln!("train: error: {e:#}");
        // The user's failure (flags, input, a refused resume): the code a restarting
        // launcher does not retry. Anything else (a dead peer, a device error): 1.
        let users = e.chain().any(|c| c.is::<train::UserError>());
        let stopped = e.chain().find_map(|c| c.downcast_ref::<train::Stopped>());
        std::process::exit(match (stopped, users) {
            (Some(s), _) => 128 + s.signal,
            (None, true) => comm::launch::USER_ERROR_EXIT,
            (None, false) => 1,
        });
    }
}

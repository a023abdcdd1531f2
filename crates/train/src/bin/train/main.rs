//! `train`: prepare data, train the Transformer LM on one or many ranks, sample from it.
//!
//!   train prepare --data data/stories                       embedded corpus → tokenizer, .bin
//!   train run --data data/stories --out runs/demo --world 2 DDP on 2 CPU threads
//!   comm-launch --nproc-per-node 2 -- train run --data … --out …  (2 CPU processes)
//!   train sample --data data/stories --out runs/demo        continue prompts from a checkpoint
//!   train compare runs/demo/log.jsonl torch.jsonl --out cmp  two trainers' logs: |Δ loss|, curves

use anyhow::{bail, Context, Result};
use candle_core::Device;
use clap::Parser;
use std::io::Write;
use train::config::{shape_by_name, shape_from_file, TrainConfig};
use train::data::{self, Source};
use train::generate::{self, SampleOpts};
use train::launch;
use train::rng::SplitMix64;
use train::trainer::{run_rank, RunOpts};

mod args;
use args::{Cli, Cmd, Compare, Gen, Prep, Run, Sample};

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
        prepare(&Prep::with_defaults(&a.data)?)?;
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
        activation_checkpointing: a.activation_checkpointing,
    };
    if a.keep == 0 {
        bail!("--keep 0: at least the newest checkpoint is kept (--keep 1)");
    }
    if let Some(f) = a.gemm_choices.as_ref().filter(|f| !f.is_file()) {
        bail!("--gemm-choices {}: no such file", f.display());
    }
    // A restarted job (--max-restarts, torchrun's, a Slurm requeue) resumes what its first
    // start began: --fresh is for that first start, else every restart would discard the
    // job's progress.
    let restart = launch::restart_count();
    if a.fresh && restart > 0 && comm::env::prints_for_all_ranks() {
        eprintln!(
            "train: --fresh applies to the job's first start; restart {restart} resumes from the newest checkpoint in {}",
            a.out.display()
        );
    }
    let o = RunOpts {
        data: a.data.clone(),
        out: a.out.clone(),
        ckpt_every: a.ckpt_every,
        keep: a.keep,
        resume: !a.fresh || restart > 0,
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
    if !launch::launched() {
        // --world ranks in this process: a batch that does not split over them is refused
        // before they start (rank threads would each refuse it after).
        train::users(c.validate(a.world))?;
    }
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
    let gen = train::users(opts(&a.gen))?;
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

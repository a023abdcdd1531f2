//! What the train crate's integration tests share: a small prepared data directory, a
//! tiny configuration, a run on CPU threads, and reading back a run's weights and its
//! log without the wall-clock fields.
#![allow(dead_code)] // each test binary uses a part

pub mod cli;

use candle_core::Device;
use seam::StagedModel;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use train::config::{ModelShape, TrainConfig};
use train::launch::{run, Backend};
use train::log::{Log, Record};
use train::trainer::{run_rank, RunOpts, Summary};

/// The vocabulary of [`data`].
pub const VOCAB: usize = 300;

/// A data directory prepared once per test binary from 120 kB of stories, 300 tokens.
pub fn data() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("train-e2e-data-{}", std::process::id()));
        train::data::prepare(
            &d,
            train::data::Source::Stories {
                seed: 5,
                bytes: 120_000,
            },
            VOCAB,
        )
        .unwrap();
        d
    })
}

/// The tiny model (d 32, 1 layer, context 16), 8 windows a step in 2 micro-batches.
pub fn cfg(strategy: &str, steps: u64) -> TrainConfig {
    TrainConfig {
        model: ModelShape {
            d_model: 32,
            layers: 1,
            heads: 2,
            d_ff: 64,
            context: 16,
        },
        bf16: false,
        strategy: strategy.into(),
        steps,
        global_batch: 8,
        accum: 2,
        lr: 1e-2,
        min_lr: 1e-3,
        warmup: 5,
        weight_decay: 0.1,
        beta1: 0.9,
        beta2: 0.95,
        clip: 0.5,
        eval_every: 10,
        eval_batches: 2,
        seed: 1,
        activation_checkpointing: false,
    }
}

/// Smaller than [`cfg`] so that 200 steps take about a second in a debug build: d 16,
/// context 8, 4 windows a step in 2 micro-batches (one window per rank each on 2 ranks),
/// an evaluation every 50 steps.
pub fn tiny(strategy: &str, steps: u64) -> TrainConfig {
    let mut c = cfg(strategy, steps);
    c.model.d_model = 16;
    c.model.d_ff = 32;
    c.model.context = 8;
    c.global_batch = 4;
    c.eval_every = 50;
    c
}

/// How [`train_with`] runs: checkpoints every `ckpt_every` steps, kept 10.
pub fn opts(out: &Path, ckpt_every: u64, stop_after: Option<u64>) -> RunOpts {
    RunOpts {
        data: data().to_path_buf(),
        out: out.to_path_buf(),
        ckpt_every: train::cadence::Cadence::Steps(ckpt_every),
        keep: 10,
        resume: true,
        stop_after,
        progress: false,
        samples: None,
        export_init: false,
        skip_nonfinite: 0,
        gemm_choices: None,
        eager: false,
    }
}

/// Trains `c` on `world` CPU threads into `out` (resuming what is there).
pub fn train_with(c: &TrainConfig, world: usize, o: &RunOpts) -> Summary {
    std::fs::create_dir_all(&o.out).unwrap();
    run(Backend::Cpu, world, |comm, dev| run_rank(c, o, comm, dev))
        .unwrap()
        .unwrap()
}

/// Trains with a checkpoint every 5 steps.
pub fn train(c: &TrainConfig, world: usize, out: &Path, stop_after: Option<u64>) -> Summary {
    train_with(c, world, &opts(out, 5, stop_after))
}

/// The weights of the checkpoint of step `step` in run directory `out`.
pub fn weights(out: &Path, step: u64) -> Vec<Vec<f32>> {
    let dir = train::state::step_dir(&out.join("checkpoints"), step);
    let (m, _) = train::load::model(&dir, VOCAB, &Device::Cpu).unwrap();
    m.params()
        .vars()
        .iter()
        .map(|v| v.as_tensor().flatten_all().unwrap().to_vec1().unwrap())
        .collect()
}

/// The log without wall-clock fields.
pub fn trajectory(out: &Path) -> Vec<Record> {
    Log::open(&out.join("log.jsonl"), u64::MAX)
        .unwrap()
        .records
        .into_iter()
        .map(|r| match r {
            Record::Train {
                step,
                loss,
                lr,
                grad_norm,
                ..
            } => Record::Train {
                step,
                loss,
                lr,
                grad_norm,
                tokens_per_s: 0.0,
                mfu: None,
                elapsed_s: 0.0,
            },
            v => v,
        })
        .collect()
}

/// max |a - b| over all weights; +inf where either is NaN or infinite (a diverged run
/// never passes): `ddp::check::max_abs_diff_host`.
pub fn max_diff(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    ddp::check::max_abs_diff_host(a, b).unwrap()
}

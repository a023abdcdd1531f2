//! The training loop end to end on CPU ranks (threads), a tiny model on a small corpus:
//! the loss falls; a run killed mid-way and resumed equals the run straight through, bit
//! for bit; a damaged newest checkpoint is skipped naming the file; DDP and ZeRO-1 equal
//! single-process training.

use candle_core::Device;
use seam::StagedModel;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use train::config::{ModelShape, TrainConfig};
use train::launch::{run, Backend};
use train::log::{Log, Record};
use train::trainer::{run_rank, RunOpts, Summary};

fn data() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("train-e2e-data-{}", std::process::id()));
        train::data::prepare(
            &d,
            train::data::Source::Stories {
                seed: 5,
                bytes: 120_000,
            },
            300,
        )
        .unwrap();
        d
    })
}

fn cfg(strategy: &str, steps: u64) -> TrainConfig {
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
    }
}

fn train(c: &TrainConfig, world: usize, out: &Path, stop_after: Option<u64>) -> Summary {
    let o = RunOpts {
        data: data().to_path_buf(),
        out: out.to_path_buf(),
        ckpt_every: 5,
        keep: 10,
        resume: true,
        stop_after,
        progress: false,
        samples: None,
        export_init: false,
    };
    std::fs::create_dir_all(out).unwrap();
    run(Backend::Cpu, world, |comm, dev| run_rank(c, &o, comm, dev))
        .unwrap()
        .unwrap()
}

fn weights(out: &Path, step: u64) -> Vec<Vec<f32>> {
    let dir = train::state::step_dir(&out.join("checkpoints"), step);
    let (m, _) = train::load::model(&dir, 300, &Device::Cpu).unwrap();
    m.params()
        .vars()
        .iter()
        .map(|v| v.as_tensor().flatten_all().unwrap().to_vec1().unwrap())
        .collect()
}

/// The log without wall-clock fields.
fn trajectory(out: &Path) -> Vec<Record> {
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
                elapsed_s: 0.0,
            },
            v => v,
        })
        .collect()
}

#[test]
fn loss_falls_and_a_killed_run_resumes_bit_for_bit() {
    let tmp = tempfile::tempdir().unwrap();
    let c = cfg("bucketed:0.01", 30);
    let straight = tmp.path().join("straight");
    let s = train(&c, 2, &straight, None);
    let first = match trajectory(&straight)[0] {
        Record::Val { step: 0, loss } => loss,
        ref r => panic!("{r:?}"),
    };
    assert!(
        (first - (300f64).ln()).abs() < 0.1,
        "initial loss {first} is about ln V"
    );
    assert!(
        s.final_val_loss < first - 1.0,
        "validation loss {first} -> {}",
        s.final_val_loss
    );
    // Killed after step 17 (checkpoints at 5, 10, 15), then resumed from 15.
    let resumed = tmp.path().join("resumed");
    train(&c, 2, &resumed, Some(17));
    let r = train(&c, 2, &resumed, None);
    assert_eq!(r.resumed_from, 15);
    assert_eq!(trajectory(&resumed), trajectory(&straight));
    assert_eq!(weights(&resumed, 30), weights(&straight, 30));
}

#[test]
fn a_damaged_newest_checkpoint_is_skipped_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let c = cfg("bucketed:25", 12);
    let out = tmp.path().join("run");
    train(&c, 1, &out, Some(10));
    let newest = train::state::step_dir(&out.join("checkpoints"), 10);
    let f = newest.join(ddp::checkpoint::FILE);
    let n = std::fs::metadata(&f).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&f)
        .unwrap()
        .set_len(n - 8)
        .unwrap();
    let (found, skipped) = train::state::newest(&out.join("checkpoints")).unwrap();
    assert_eq!(found.unwrap().0, 5);
    assert!(
        skipped.len() == 1 && skipped[0].contains("ddp.safetensors"),
        "{skipped:?}"
    );
    // Killed between the weights and the training state: a complete checkpoint of the
    // checkpoint crate without train.safetensors. Skipped, saying why.
    let five = train::state::step_dir(&out.join("checkpoints"), 5);
    checkpoint::Checkpoint::open(&five)
        .unwrap()
        .replace(&[], &[train::state::STATE_FILE])
        .unwrap();
    let (found, skipped) = train::state::newest(&out.join("checkpoints")).unwrap();
    assert!(found.is_none() && skipped.len() == 2, "{skipped:?}");
    assert!(
        skipped[1].contains("step-00000005 has no train.safetensors (interrupted"),
        "{skipped:?}"
    );
    // Another configuration refuses the checkpoint, naming the field.
    let out2 = tmp.path().join("run2");
    train(&c, 1, &out2, Some(5));
    let mut other = c.clone();
    other.lr = 2e-2;
    let o = RunOpts {
        data: data().to_path_buf(),
        out: out2.clone(),
        ckpt_every: 5,
        keep: 3,
        resume: true,
        stop_after: None,
        progress: false,
        samples: None,
        export_init: false,
    };
    let e = run(Backend::Cpu, 1, |comm, dev| run_rank(&other, &o, comm, dev))
        .err()
        .unwrap();
    assert!(
        format!("{e:#}").contains("another configuration: lr: 0.01 vs 0.02"),
        "{e:#}"
    );
}

fn max_diff(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    a.iter()
        .flatten()
        .zip(b.iter().flatten())
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn ddp_and_zero1_equal_single_process_training() {
    let tmp = tempfile::tempdir().unwrap();
    let steps = 40;
    let single = tmp.path().join("single");
    train(&cfg("single", steps), 1, &single, None);
    let w1 = weights(&single, steps);
    for (strategy, world) in [("bucketed:0.01", 2), ("overlap", 4), ("zero1", 2)] {
        let out = tmp.path().join(strategy.replace(':', "-"));
        train(&cfg(strategy, steps), world, &out, None);
        let d = max_diff(&weights(&out, steps), &w1);
        assert!(
            d < 2e-4,
            "{strategy} on {world} ranks: max |w - w_single| = {d}"
        );
    }
    // ZeRO-1 resumes too (its checkpoint in group-0/).
    let z = tmp.path().join("zero1-resume");
    train(&cfg("zero1", steps), 2, &z, Some(23));
    let r = train(&cfg("zero1", steps), 2, &z, None);
    assert_eq!(r.resumed_from, 20);
    assert_eq!(
        weights(&z, steps),
        weights(&tmp.path().join("zero1"), steps)
    );
}

//! The training loop end to end on CPU ranks (threads), a tiny model on a small corpus:
//! the loss falls; a run killed mid-way and resumed equals the run straight through, bit
//! for bit; a damaged newest checkpoint is skipped naming the file. (Data parallelism
//! against single-process training: `data_parallel.rs`; threads against processes:
//! `processes.rs`; bad inputs: `bad_inputs.rs`.)

mod common;

use common::*;
use train::launch::{run, Backend};
use train::log::Record;
use train::trainer::{run_rank, RunOpts};

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
        s.final_val.unwrap().1 < first - 1.0,
        "validation loss {first} -> {:?}",
        s.final_val
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
        ckpt_every: train::cadence::Cadence::Steps(5),
        keep: 3,
        resume: true,
        stop_after: None,
        progress: false,
        samples: None,
        export_init: false,
        skip_nonfinite: 0,
        gemm_choices: None,
        eager: false,
    };
    let e = run(Backend::Cpu, 1, |comm, dev| run_rank(&other, &o, comm, dev))
        .err()
        .unwrap();
    assert!(
        format!("{e:#}").contains("another configuration: lr: 0.01 vs 0.02"),
        "{e:#}"
    );
}

//! The same DDP run on 2 CPU ranks as threads of one process (`comm::cpu`) and as 2
//! processes of the `train` binary under the launcher (`comm::proc`, ranks in a TCP
//! ring): the same 100-step trajectory and final weights, bit for bit. Both backends add
//! the two ranks' halves once per element in f32 and divide by 2 (a + b = b + a), so any
//! difference is a bug, not rounding.

mod common;

use comm::launch::{run, LaunchSpec};
use common::*;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;
use train::config::TrainConfig;

/// The tests run one at a time: a port picked by binding port 0 and closing it can be
/// handed to a test running beside it.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

const TRAIN: &str = env!("CARGO_BIN_EXE_train");

/// `train run` arguments for `c`, the model shape written to `out/model.json`.
fn args(c: &TrainConfig, out: &Path, ckpt_every: u64) -> Vec<String> {
    std::fs::create_dir_all(out).unwrap();
    let shape = out.join("model.json");
    std::fs::write(&shape, serde_json::to_vec(&c.model).unwrap()).unwrap();
    let mut a: Vec<String> = vec![
        "run".into(),
        "--data".into(),
        data().display().to_string(),
        "--out".into(),
        out.display().to_string(),
        "--model-config".into(),
        shape.display().to_string(),
    ];
    for (k, v) in [
        ("strategy", c.strategy.clone()),
        ("steps", c.steps.to_string()),
        ("global-batch", c.global_batch.to_string()),
        ("accum", c.accum.to_string()),
        ("lr", c.lr.to_string()),
        ("min-lr", c.min_lr.to_string()),
        ("warmup", c.warmup.to_string()),
        ("weight-decay", c.weight_decay.to_string()),
        ("beta1", c.beta1.to_string()),
        ("beta2", c.beta2.to_string()),
        ("clip", c.clip.to_string()),
        ("eval-every", c.eval_every.to_string()),
        ("eval-batches", c.eval_batches.to_string()),
        ("seed", c.seed.to_string()),
        ("ckpt-every", ckpt_every.to_string()),
        ("max-new", "1".into()),
    ] {
        a.push(format!("--{k}"));
        a.push(v);
    }
    assert!(!c.bf16);
    a.push("--no-progress".into());
    a
}

#[test]
fn ddp_as_2_processes_equals_ddp_as_2_threads_bit_for_bit() {
    let _one = one_at_a_time();
    let tmp = tempfile::tempdir().unwrap();
    let steps = 100;
    let c = tiny("bucketed:0.02", steps);
    let threads = tmp.path().join("threads");
    train_with(&c, 2, &opts(&threads, steps, None));
    let procs = tmp.path().join("processes");
    launch(&c, &procs, (steps, 0), &[]).unwrap_or_else(|e| panic!("2 processes: {e}"));
    // The binary ran the same configuration (it is in the checkpoint) ...
    let (_, saved) =
        train::state::read(&train::state::step_dir(&procs.join("checkpoints"), steps)).unwrap();
    assert_eq!(saved, c);
    // ... and gave the same bits.
    let (t, t2) = (trajectory(&procs), trajectory(&threads));
    assert_eq!(t.len(), 103);
    for (a, b) in t.iter().zip(&t2) {
        assert_eq!(a, b, "processes (left) against threads (right)");
    }
    assert!(weights(&procs, steps) == weights(&threads, steps));
}

/// Two processes of `train` under the launcher (checkpoints `ckpt_every` steps apart, up
/// to `restarts` restarts), with `env` added.
fn launch(
    c: &TrainConfig,
    out: &Path,
    (ckpt_every, restarts): (u64, usize),
    env: &[(&str, &str)],
) -> Result<(), String> {
    launch_with(c, out, (ckpt_every, restarts), env, &[])
}

/// [`launch`] with `extra` arguments after the others.
fn launch_with(
    c: &TrainConfig,
    out: &Path,
    (ckpt_every, restarts): (u64, usize),
    env: &[(&str, &str)],
    extra: &[&str],
) -> Result<(), String> {
    let mut a = args(c, out, ckpt_every);
    a.extend(extra.iter().map(|x| x.to_string()));
    let mut spec = LaunchSpec::local(2, TRAIN, a);
    spec.env.push(("COMM_TIMEOUT_S".into(), "60".into()));
    spec.env
        .extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    spec.max_restarts = restarts;
    spec.grace = Duration::from_secs(5);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(run(&spec).map_err(|e| e.to_string())));
    rx.recv_timeout(Duration::from_secs(300))
        .expect("the launch did not finish within 300 s")
}

#[test]
fn max_restarts_survives_two_kill_9s_with_the_bits_of_a_run_never_killed() {
    let _one = one_at_a_time();
    let tmp = tempfile::tempdir().unwrap();
    let steps = 24;
    let c = tiny("zero1", steps);
    let clean = tmp.path().join("clean");
    launch(&c, &clean, (5, 0), &[]).unwrap();
    // Rank 1 dies at step 8 (3 steps past the checkpoint of step 5), then rank 0 at step 17
    // of the restarted job (2 past step 15's).
    let kills = [("TRAIN_FAULT_KILL", "1:8:0,0:17:1")];
    let without = tmp.path().join("without");
    let e = launch(&c, &without, (5, 0), &kills).unwrap_err();
    assert!(e.contains("rank 1 failed (signal: 9"), "{e}");
    // With --fresh, as a user starting a new job writes it: only the first start begins
    // afresh; each restart resumes (else it would move the job's progress aside).
    let killed = tmp.path().join("killed");
    launch_with(&c, &killed, (5, 3), &kills, &["--fresh"])
        .unwrap_or_else(|e| panic!("restarted job: {e}"));
    assert!(
        !killed.join("previous-1").exists(),
        "a restart started afresh and moved the job's progress aside"
    );
    let (t, want) = (trajectory(&killed), trajectory(&clean));
    assert_eq!(t.len(), want.len(), "every step logged once");
    for (a, b) in t.iter().zip(&want) {
        assert_eq!(
            a, b,
            "killed twice and restarted (left) against never killed (right)"
        );
    }
    assert!(weights(&killed, steps) == weights(&clean, steps));
}

#[test]
fn a_users_failure_is_not_restarted() {
    let _one = one_at_a_time();
    let tmp = tempfile::tempdir().unwrap();
    let c = tiny("zero1", 10);
    let out = tmp.path().join("run");
    launch(&c, &out, (5, 0), &[]).unwrap();
    // The same directory with another configuration: the resume is refused, exit code 2.
    let other = TrainConfig {
        lr: c.lr * 2.0,
        ..c.clone()
    };
    let t0 = std::time::Instant::now();
    let e = launch(&other, &out, (5, 3), &[]).unwrap_err();
    assert!(
        e.contains("not restarted") && e.contains("exit status: 2"),
        "{e}"
    );
    assert!(t0.elapsed() < Duration::from_secs(60), "retried: {e}");
}

//! The run directory is the user's (issue 34): real `train` processes on CPU.
//! - two runs on one `--out`: the second is refused at once, naming the first, which
//!   finishes with its own checkpoints and log;
//! - `--fresh` moves the previous run aside, never deleting it;
//! - a diverged run stops naming the step, its log stays readable, and it restarts;
//! - a learning rate that is not a short decimal survives the stored configuration;
//! - a resume on other data is refused, naming both data directories;
//! - a log line cut short is dropped with a warning naming it.

mod common;

use common::*;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const TRAIN: &str = env!("CARGO_BIN_EXE_train");

fn cmd(out: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(TRAIN);
    c.args(["run", "--data"])
        .arg(data())
        .arg("--out")
        .arg(out)
        .args(["--model", "nano", "--no-progress", "--global-batch", "4"])
        .args(args);
    c
}

fn run(out: &Path, args: &[&str]) -> Output {
    cmd(out, args).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn ok(out: &Path, args: &[&str]) -> String {
    let o = run(out, args);
    assert!(o.status.success(), "train {args:?}: {}", stderr(&o));
    stderr(&o)
}

/// The steps of the train records of `out`'s log (it must parse).
fn logged_steps(out: &Path) -> Vec<u64> {
    train::log::read(&out.join("log.jsonl"))
        .unwrap()
        .iter()
        .filter_map(|r| match r {
            train::log::Record::Train { step, .. } => Some(*step),
            _ => None,
        })
        .collect()
}

fn checkpoints(out: &Path) -> Vec<u64> {
    let mut v: Vec<u64> = train::state::list(&out.join("checkpoints"))
        .unwrap()
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    v.sort();
    v
}

#[test]
fn a_second_run_on_the_same_out_is_refused_naming_the_first() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("two");
    let first = ["--steps", "12", "--ckpt-every", "2", "--keep", "30"];
    let mut a = cmd(&out, &first)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The event: the first run has written its name into the lock. Then it is stopped, so
    // that it surely holds the directory while the second starts, however fast it trains.
    let lock = out.join(train::rundir::LOCK_FILE);
    let t0 = Instant::now();
    while std::fs::read_to_string(&lock).map_or(true, |s| s.is_empty()) {
        assert!(a.try_wait().unwrap().is_none(), "the first run ended early");
        assert!(t0.elapsed() < Duration::from_secs(120), "no lock written");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = a.id().to_string();
    let signal = |sig: &str| {
        let st = Command::new("kill").args([sig, &pid]).status().unwrap();
        assert!(st.success(), "kill {sig} {pid}");
    };
    signal("-STOP");
    let t = Instant::now();
    let b = run(
        &out,
        &["--steps", "12", "--ckpt-every", "2", "--lr", "0.002"],
    );
    let took = t.elapsed();
    signal("-CONT");
    let e = stderr(&b);
    assert!(!b.status.success(), "the second run was accepted: {e}");
    assert!(
        e.contains("in use") && e.contains(&format!("pid {pid}")),
        "{e}"
    );
    assert!(took < Duration::from_secs(30), "refused after {took:?}");
    let a = a.wait_with_output().unwrap();
    assert!(a.status.success(), "the first run: {}", stderr(&a));
    assert_eq!(
        logged_steps(&out),
        (1..=12).collect::<Vec<_>>(),
        "one run's log"
    );
    assert_eq!(checkpoints(&out), vec![2, 4, 6, 8, 10, 12]);
    let cfg: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("config.json")).unwrap()).unwrap();
    assert_eq!(cfg["lr"], 3e-3, "the first run's configuration");
}

#[test]
fn fresh_moves_the_previous_run_aside() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("fresh");
    ok(&out, &["--steps", "6", "--ckpt-every", "2"]);
    let args = [
        "--fresh",
        "--steps",
        "4",
        "--ckpt-every",
        "2",
        "--lr",
        "0.001",
    ];
    let e = ok(&out, &args);
    let prev = out.join("previous-1");
    assert!(e.contains("moved to") && e.contains("previous-1"), "{e}");
    assert_eq!(checkpoints(&prev), vec![2, 4, 6], "the old run, whole");
    assert_eq!(logged_steps(&prev), (1..=6).collect::<Vec<_>>());
    assert_eq!(checkpoints(&out), vec![2, 4], "only the fresh run's");
    assert_eq!(logged_steps(&out), (1..=4).collect::<Vec<_>>());
    // Each run has its identity, in config.json and in every checkpoint.
    let id = |dir: &Path| -> String {
        let c: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("config.json")).unwrap()).unwrap();
        c["run_id"].as_str().unwrap().to_string()
    };
    let (old_id, new_id) = (id(&prev), id(&out));
    assert_ne!(old_id, new_id);
    for (dir, want) in [(&prev, &old_id), (&out, &new_id)] {
        for (_, d) in train::state::list(&dir.join("checkpoints")).unwrap() {
            assert_eq!(train::state::read_run(&d).unwrap().as_ref(), Some(want));
        }
    }
    // The fresh run's own command resumes it (nothing left to train), as the same run …
    let again: Vec<&str> = args[1..].to_vec();
    ok(&out, &again);
    assert_eq!(id(&out), new_id);
    // … and --fresh again keeps both earlier runs.
    ok(&out, &args);
    assert_eq!(checkpoints(&out.join("previous-2")), vec![2, 4]);
    assert_eq!(checkpoints(&prev), vec![2, 4, 6]);
}

#[test]
fn a_diverged_run_stops_naming_the_step_and_starts_again_with_fresh() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("nan");
    let o = run(
        &out,
        &["--steps", "20", "--ckpt-every", "1", "--lr", "1e30"],
    );
    let e = stderr(&o);
    assert!(!o.status.success(), "a diverged run exited 0: {e}");
    assert!(e.contains("diverged") && e.contains("step "), "{e}");
    // The log holds only finite values, and reads back.
    let recs = train::log::read(&out.join("log.jsonl")).unwrap();
    assert!(!recs.is_empty());
    for (what, flag) in [("inf", "--lr"), ("nan", "--clip")] {
        let o = run(&out, &["--steps", "20", flag, what]);
        assert!(!o.status.success());
        assert!(stderr(&o).contains("not a finite number"), "{}", stderr(&o));
    }
    ok(&out, &["--fresh", "--steps", "3", "--lr", "0.003"]);
    assert_eq!(logged_steps(&out), vec![1, 2, 3]);
}

#[test]
fn a_learning_rate_of_many_digits_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("digits");
    // 3e-4 · 64 / 48, as a script computes it.
    let args = [
        "--steps",
        "3",
        "--ckpt-every",
        "1",
        "--lr",
        "0.00039999999999999996",
    ];
    let mut first = args.to_vec();
    first.extend(["--stop-after", "1"]);
    ok(&out, &first);
    let e = ok(&out, &args);
    assert!(!e.contains("another configuration"), "{e}");
    assert_eq!(logged_steps(&out), vec![1, 2, 3]);
}

#[test]
fn a_resume_on_other_data_is_refused_naming_both_directories() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("data");
    let other = tmp.path().join("other-data");
    let src = train::data::Source::Stories {
        seed: 9,
        bytes: 120_000,
    };
    train::data::prepare(&other, src, VOCAB).unwrap();
    ok(
        &out,
        &["--steps", "4", "--ckpt-every", "2", "--stop-after", "2"],
    );
    let o = Command::new(TRAIN)
        .args(["run", "--data"])
        .arg(&other)
        .arg("--out")
        .arg(&out)
        .args(["--model", "nano", "--no-progress", "--global-batch", "4"])
        .args(["--steps", "4", "--ckpt-every", "2"])
        .output()
        .unwrap();
    let e = stderr(&o);
    assert!(!o.status.success(), "resumed on other data: {e}");
    let (mine, theirs) = (data().display().to_string(), other.display().to_string());
    assert!(e.contains(&mine) && e.contains(&theirs), "{e}");
}

#[test]
fn a_log_line_cut_short_is_dropped_with_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("torn");
    let args = ["--steps", "4", "--ckpt-every", "2"];
    ok(&out, &args);
    let log = out.join("log.jsonl");
    let mut text = std::fs::read_to_string(&log).unwrap();
    let lines = text.lines().count();
    text += "{\"type\":\"train\",\"st";
    std::fs::write(&log, &text).unwrap();
    let e = ok(&out, &args);
    assert!(
        e.contains(&format!("log.jsonl:{}", lines + 1)) && e.contains("partial last line"),
        "{e}"
    );
    assert_eq!(logged_steps(&out), vec![1, 2, 3, 4]);
}

#[test]
fn a_save_killed_before_its_manifest_is_done_again_on_resume() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("killed-save");
    let args = ["--steps", "6", "--ckpt-every", "2", "--stop-after", "4"];
    ok(&out, &args);
    // Killed after step 4's files (train.safetensors included) were renamed, before the
    // manifest: the step directory holds files no manifest lists.
    let step4 = train::state::step_dir(&out.join("checkpoints"), 4);
    std::fs::remove_file(step4.join("manifest.json")).unwrap();
    let e = ok(&out, &args[..4]);
    assert!(e.contains("replacing an incomplete checkpoint"), "{e}");
    assert_eq!(checkpoints(&out), vec![2, 4, 6]);
    for (s, d) in train::state::list(&out.join("checkpoints")).unwrap() {
        assert_eq!(
            train::state::read(&d).unwrap().0,
            s,
            "{} complete",
            d.display()
        );
    }
}

#[test]
fn a_resume_takes_changes_that_keep_the_past_and_names_them() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("policy");
    ok(&out, &["--steps", "4", "--ckpt-every", "2"]);
    // Longer, evaluated on another cadence: accepted, each change named.
    let e = ok(
        &out,
        &["--steps", "6", "--ckpt-every", "2", "--eval-every", "3"],
    );
    assert!(
        e.contains("steps: 4 → 6 (the cosine schedule stretches"),
        "{e}"
    );
    assert!(e.contains("eval_every: 100 → 3"), "{e}");
    assert_eq!(logged_steps(&out), (1..=6).collect::<Vec<_>>());
    // Another learning rate would rewrite the past: refused, naming it.
    let o = run(&out, &["--steps", "8", "--lr", "0.002"]);
    let e = stderr(&o);
    assert!(
        !o.status.success() && e.contains("lr: 0.003 vs 0.002"),
        "{e}"
    );
}

#[test]
fn run_and_sample_flags_are_checked_and_a_failed_start_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("flags");
    let o = run(&out, &["--steps", "2", "--keep", "0"]);
    assert!(
        !o.status.success() && stderr(&o).contains("--keep 0"),
        "{}",
        stderr(&o)
    );
    // A start that fails (no data there) leaves no empty --out behind.
    let o = Command::new(TRAIN)
        .args(["run", "--data"])
        .arg(tmp.path().join("no-data"))
        .arg("--out")
        .arg(&out)
        .args(["--model", "nano", "--no-progress", "--steps", "2"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(!out.exists(), "{} left behind", out.display());
    ok(&out, &["--steps", "2", "--ckpt-every", "2"]);
    let sample = |args: &[&str]| {
        let mut c = Command::new(TRAIN);
        c.args(["sample", "--data"]).arg(data()).args(args);
        c
    };
    let o = sample(&["--out", "/nonexistent/run"]).output().unwrap();
    assert!(stderr(&o).contains("no such directory"), "{}", stderr(&o));
    for t in ["nan", "-1"] {
        let flag = format!("--temperature={t}");
        let o = sample(&["--out", out.to_str().unwrap(), &flag])
            .output()
            .unwrap();
        assert!(
            !o.status.success() && stderr(&o).contains("--temperature"),
            "{t}: {}",
            stderr(&o)
        );
    }
    // A reader that stops after one line (`| head -1`): no panic.
    let mut child = sample(&["--out", out.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    let mut so = std::io::BufReader::new(child.stdout.take().unwrap());
    std::io::BufRead::read_line(&mut so, &mut first).unwrap();
    drop(so);
    let o = child.wait_with_output().unwrap();
    assert!(first.starts_with("checkpoint "), "{first}");
    assert!(
        o.status.success() && !stderr(&o).contains("panicked"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_file_named_like_a_step_is_refused_before_training() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("stepfile");
    std::fs::create_dir_all(out.join("checkpoints")).unwrap();
    let f = train::state::step_dir(&out.join("checkpoints"), 50);
    std::fs::write(&f, b"not a checkpoint").unwrap();
    let o = run(&out, &["--steps", "60", "--ckpt-every", "50"]);
    let e = stderr(&o);
    assert!(!o.status.success() && e.contains("step-00000050"), "{e}");
    assert!(
        !out.join("log.jsonl").exists(),
        "it trained before refusing: {e}"
    );
}

#[test]
fn a_model_that_cannot_fit_is_refused_before_it_is_built() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("huge");
    // About 3.3 trillion parameters: no host holds its weights, let alone AdamW's state.
    let shape = tmp.path().join("huge.json");
    let json = r#"{"d_model": 65536, "layers": 64, "heads": 64, "d_ff": 262144, "context": 64}"#;
    std::fs::write(&shape, json).unwrap();
    let t = Instant::now();
    let o = Command::new(TRAIN)
        .args(["run", "--data"])
        .arg(data())
        .arg("--out")
        .arg(&out)
        .arg("--model-config")
        .arg(&shape)
        .args(["--no-progress", "--steps", "2", "--backend", "cpu"])
        .output()
        .unwrap();
    let e = stderr(&o);
    assert!(!o.status.success(), "{e}");
    assert!(
        e.contains("parameters") && e.contains("of memory") && e.contains("MemAvailable"),
        "{e}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(60),
        "refused after {:?}",
        t.elapsed()
    );
}

//! The run directory is the user's (issue 34): real `train` processes on CPU.
//! - two runs on one `--out`: the second is refused at once, naming the first, which
//!   finishes with its own checkpoints and log;
//! - `--fresh` moves the previous run aside, never deleting it, with a new run identity;
//! - a log line cut short is dropped with a warning naming it;
//! - a save killed before its manifest is done again on resume;
//! - a file named like a step directory is refused before any step is trained.

mod common;

use common::cli::*;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
    // The second run ends while the first is stopped: it did not wait for the lock. The
    // bound only keeps a run that waits from hanging the test; it is no speed.
    let mut b = cmd(
        &out,
        &["--steps", "12", "--ckpt-every", "2", "--lr", "0.002"],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let t = Instant::now();
    while b.try_wait().unwrap().is_none() {
        if t.elapsed() > Duration::from_secs(300) {
            let _ = b.kill();
            signal("-CONT");
            panic!("the second run waited for the first (stopped) one's lock");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let b = b.wait_with_output().unwrap();
    signal("-CONT");
    let e = stderr(&b);
    assert!(!b.status.success(), "the second run was accepted: {e}");
    assert!(
        e.contains("in use") && e.contains(&format!("pid {pid}")),
        "{e}"
    );
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
    let manifest = train::state::manifest_dir(&step4).join("manifest.json");
    std::fs::remove_file(manifest).unwrap();
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

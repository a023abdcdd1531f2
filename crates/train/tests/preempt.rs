//! A preemption notice: SIGTERM to a running `train run` (2 ranks) makes every rank stop
//! after the same step with a checkpoint of it, exit 128 + 15; the same command resumes
//! from that checkpoint with every step logged once.

mod common;

use common::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TRAIN: &str = env!("CARGO_BIN_EXE_train");

fn cmd(out: &std::path::Path, extra: &[&str]) -> Command {
    let mut c = Command::new(TRAIN);
    c.args(["run", "--data"])
        .arg(data())
        .arg("--out")
        .arg(out)
        .args(["--model", "nano", "--no-progress", "--max-new", "1"])
        .args(["--backend", "cpu", "--world", "2", "--global-batch", "4"])
        .args([
            "--steps",
            "5000",
            "--eval-every",
            "100000",
            "--ckpt-every",
            "100000",
        ])
        .args(extra);
    c
}

/// Train records' steps in the run's log.
fn steps(out: &std::path::Path) -> Vec<u64> {
    std::fs::read_to_string(out.join("log.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("\"train\""))
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["step"].as_u64())
        .collect()
}

#[test]
fn sigterm_writes_a_checkpoint_of_the_current_step_and_the_next_run_resumes_from_it() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let mut child = cmd(&out, &[])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Mid-run: some steps logged (an event, not a guess of speed), far from the end.
    let t0 = Instant::now();
    while steps(&out).len() < 5 {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "no 5 steps in 120 s"
        );
        assert!(child.try_wait().unwrap().is_none(), "train exited early");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill(2) on the child we started.
    unsafe { libc_kill(child.id() as i32, 15) };
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(128 + 15), "{err}");
    assert!(err.contains("stopped by SIGTERM after step"), "{err}");
    let logged = steps(&out);
    let last = *logged.last().unwrap();
    assert!(last < 5000, "{last}");
    assert_eq!(
        logged,
        (1..=last).collect::<Vec<_>>(),
        "every step once, up to the stop"
    );
    let ckpt = train::state::step_dir(&out.join("checkpoints"), last);
    assert!(ckpt.is_dir(), "no checkpoint of step {last}: {err}");
    // The same command resumes there (3 more steps).
    let stop = (last + 3).to_string();
    let o = cmd(&out, &["--stop-after", &stop]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(steps(&out), (1..=last + 3).collect::<Vec<_>>());
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

//! `train run`'s closing summary states only what the run measured (issue 33, item 7): a
//! run stopped before any evaluation gives the step-0 validation with its step, never a
//! made-up 0.0000; the files it lists exist; a run with nothing left to train says so.

mod common;

use common::*;
use std::process::Command;

const TRAIN: &str = env!("CARGO_BIN_EXE_train");

/// Runs `train run` with `args` on the shared data; (stdout, stderr), failing on a non-zero exit.
fn run(out: &std::path::Path, args: &[&str]) -> String {
    let o = Command::new(TRAIN)
        .args(["run", "--data"])
        .arg(data())
        .arg("--out")
        .arg(out)
        .args(["--model", "nano", "--no-progress", "--max-new", "4"])
        .args(args)
        .output()
        .unwrap();
    let (so, se) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    assert!(o.status.success(), "train {args:?}: {se}");
    so
}

/// The paths the summary's `files:` line lists.
fn listed(stdout: &str) -> Vec<String> {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("files: "))
        .unwrap_or_else(|| panic!("no files line in {stdout}"));
    line.split(", ").map(str::to_string).collect()
}

#[test]
fn the_summary_states_only_what_was_measured() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let long = ["--steps", "100", "--eval-every", "50", "--ckpt-every", "50"];
    let so = run(&out, &[&long[..], &["--stop-after", "3"]].concat());
    assert!(so.contains("trained steps 0..3"), "{so}");
    assert!(
        !so.contains("0.0000"),
        "a value that was not measured: {so}"
    );
    assert!(so.contains("(at step 0)"), "the step-0 validation: {so}");
    let files = listed(&so);
    for f in &files {
        assert!(
            std::path::Path::new(f.trim_end_matches('/')).exists(),
            "{f} listed, absent: {so}"
        );
    }
    assert!(
        !files
            .iter()
            .any(|f| f.ends_with("samples.txt") || f.contains("checkpoints")),
        "neither samples nor a checkpoint were written: {so}"
    );

    // A finished run, run again: nothing to train, and no loss to state.
    let done = tmp.path().join("done");
    let short = ["--steps", "4", "--eval-every", "2", "--ckpt-every", "2"];
    let first = run(&done, &short);
    assert!(
        first.contains("validation loss") && first.contains("(at step 4)"),
        "{first}"
    );
    assert!(
        listed(&first).iter().any(|f| f.contains("checkpoints")),
        "{first}"
    );
    let again = run(&done, &short);
    assert!(again.contains("no step trained"), "{again}");
    assert!(!again.contains("train loss"), "{again}");
}

/// The run says which device it took; by default the GPU where the binary has CUDA and one
/// is visible, else the CPU, saying why (a CPU build says how to get the GPU).
#[test]
fn the_run_names_its_device() {
    let tmp = tempfile::tempdir().unwrap();
    let o = common::cli::cmd(&tmp.path().join("dev"), &["--steps", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("train: device: "))
        .unwrap_or_else(|| panic!("no device line: {err}"));
    match comm::nccl::gpu_count() {
        Err(comm::CommError::Unavailable { .. }) => assert!(
            line.contains("cpu (built without CUDA") && line.contains("--features cuda"),
            "{line}"
        ),
        Ok(n) if n > 0 => assert!(line.contains("cuda"), "{line}"),
        _ => assert!(line.contains("cpu"), "{line}"),
    }
}

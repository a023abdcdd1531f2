//! Running the `train` binary as a user does, for the run-directory and resume tests:
//! `train run` on the shared data with the `nano` model, and reading back its log and
//! checkpoints.

use super::data;
use std::path::Path;
use std::process::{Command, Output};

pub const TRAIN: &str = env!("CARGO_BIN_EXE_train");

/// `train run` on the shared data into `out`: the `nano` model, 4 windows a step, 4 sampled
/// tokens, no progress bar, then `args`.
pub fn cmd(out: &Path, args: &[&str]) -> Command {
    cmd_on(data(), out, args)
}

/// [`cmd`] on the data directory `data`.
pub fn cmd_on(data: &Path, out: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(TRAIN);
    c.args(["run", "--data"])
        .arg(data)
        .arg("--out")
        .arg(out)
        .args([
            "--model",
            "nano",
            "--no-progress",
            "--global-batch",
            "4",
            "--max-new",
            "4",
        ])
        .args(args);
    c
}

pub fn run(out: &Path, args: &[&str]) -> Output {
    cmd(out, args).output().unwrap()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn ok(out: &Path, args: &[&str]) -> String {
    let o = run(out, args);
    assert!(o.status.success(), "train {args:?}: {}", stderr(&o));
    stderr(&o)
}

/// The steps of the train records of `out`'s log (it must parse).
pub fn logged_steps(out: &Path) -> Vec<u64> {
    train::log::read(&out.join("log.jsonl"))
        .unwrap()
        .iter()
        .filter_map(|r| match r {
            train::log::Record::Train { step, .. } => Some(*step),
            _ => None,
        })
        .collect()
}

pub fn checkpoints(out: &Path) -> Vec<u64> {
    let mut v: Vec<u64> = train::state::list(&out.join("checkpoints"))
        .unwrap()
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    v.sort();
    v
}

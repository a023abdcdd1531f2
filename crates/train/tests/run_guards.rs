//! What a run refuses or accepts (issue 34): real `train` processes on CPU.
//! - a diverged run stops naming the step, its log stays readable, and it restarts;
//! - `--skip-nonfinite N` skips up to N non-finite steps in a row, then stops;
//! - a learning rate that is not a short decimal survives the stored configuration;
//! - a resume on other data is refused, naming both data directories;
//! - a resume takes the changes that keep the past, naming each;
//! - bad run and sample flags are refused, and a failed start leaves no `--out`;
//! - a model that cannot fit is refused before it is built;
//! - `run --prepare` writes the data `prepare` writes with its defaults.

mod common;

use common::cli::*;
use common::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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

/// `--skip-nonfinite 3`: after `--lr 1e30` blows the weights up, three non-finite steps in
/// a row are skipped (logged as `skipped`, AdamW writing nothing), the fourth stops the run
/// naming its step; the log reads back, every train record finite; the directory resumes.
#[test]
fn skip_nonfinite_skips_up_to_n_steps_in_a_row_then_stops() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("skip");
    let args = [
        "--steps",
        "20",
        "--ckpt-every",
        "1",
        "--lr",
        "1e30",
        "--skip-nonfinite",
        "3",
    ];
    let o = run(&out, &args);
    let e = stderr(&o);
    assert!(!o.status.success(), "{e}");
    assert!(
        e.contains("skipped (3 in a row, --skip-nonfinite 3)"),
        "{e}"
    );
    assert!(
        e.contains("diverged") && !e.contains("skipped (4 in a row"),
        "{e}"
    );
    let recs = train::log::read(&out.join("log.jsonl")).unwrap();
    let skipped: Vec<u64> = recs
        .iter()
        .filter_map(|r| match r {
            train::log::Record::Skipped { step, .. } => Some(*step),
            _ => None,
        })
        .collect();
    assert_eq!(skipped.len(), 3, "{recs:?}");
    assert!(
        skipped.windows(2).all(|w| w[1] == w[0] + 1),
        "in a row: {skipped:?}"
    );
    for r in &recs {
        if let train::log::Record::Train {
            loss, grad_norm, ..
        } = r
        {
            assert!(
                loss.is_finite() && grad_norm.is_none_or(f64::is_finite),
                "{r:?}"
            );
        }
    }
    ok(&out, &["--fresh", "--steps", "3", "--lr", "0.003"]);
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
    let o = cmd_on(&other, &out, &["--steps", "4", "--ckpt-every", "2"])
        .output()
        .unwrap();
    let e = stderr(&o);
    assert!(!o.status.success(), "resumed on other data: {e}");
    let (mine, theirs) = (data().display().to_string(), other.display().to_string());
    assert!(e.contains(&mine) && e.contains(&theirs), "{e}");
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
    // A GEMM table that is not there, or not one (or, on the CPU, any): refused, naming it.
    let table = tmp.path().join("table.json");
    let t = table.to_str().unwrap();
    let o = run(&out, &["--steps", "2", "--gemm-choices", t]);
    let e = stderr(&o);
    assert!(
        !o.status.success() && e.contains("no such file") && e.contains(t),
        "{e}"
    );
    std::fs::write(&table, "{}").unwrap();
    let o = run(&out, &["--steps", "2", "--gemm-choices", t]);
    let e = stderr(&o);
    assert!(!o.status.success() && e.contains(t), "{e}");
    // A strategy train does not know is named with every one it does; no micro-batches.
    let o = run(&out, &["--steps", "2", "--strategy", "zero9"]);
    let e = stderr(&o);
    assert!(
        !o.status.success() && e.contains("\"zero9\"") && e.contains(train::config::STRATEGIES),
        "{e}"
    );
    let o = run(&out, &["--steps", "2", "--accum", "0"]);
    assert!(stderr(&o).contains("--accum 0"), "{}", stderr(&o));
    // A shape file and a size or a context beside it: refused (the file's shape would
    // silently win), naming both flags. clap refuses before the file is read.
    let shape = tmp.path().join("shape.json");
    for other in [["--model", "micro"], ["--context", "32"]] {
        let o = Command::new(TRAIN)
            .args(["run", "--model-config", shape.to_str().unwrap()])
            .args(other)
            .output()
            .unwrap();
        let e = stderr(&o);
        assert!(
            o.status.code() == Some(2) && e.contains("--model-config") && e.contains(other[0]),
            "{e}"
        );
    }
    // A start that fails (no data there) leaves no empty --out behind.
    let o = cmd_on(&tmp.path().join("no-data"), &out, &["--steps", "2"])
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

#[test]
fn run_prepare_writes_the_data_that_prepare_writes_by_default() {
    let tmp = tempfile::tempdir().unwrap();
    let (by_prepare, by_run) = (tmp.path().join("prepared"), tmp.path().join("by-run"));
    let o = Command::new(TRAIN)
        .args(["prepare", "--data"])
        .arg(&by_prepare)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let o = cmd_on(
        &by_run,
        &tmp.path().join("run"),
        &["--prepare", "--steps", "1"],
    )
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    for f in ["meta.json", "train.bin", "val.bin"] {
        let read = |d: &std::path::Path| std::fs::read(d.join(f)).unwrap();
        assert!(read(&by_prepare) == read(&by_run), "{f} differs");
    }
}

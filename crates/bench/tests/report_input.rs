//! `bench report` on damaged input: every line it leaves out is named (file:line and why)
//! on stderr and in the report, a crashed run's truncated last line among them, while the
//! good lines are still reported; a missing `--torch` file is an error naming it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `bench report` with `args`, killed after 30 s: (success, stdout, stderr).
fn report(args: &[&str]) -> (bool, String, String) {
    let t = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_bench"))
        .arg("report")
        .args(args)
        .args(["--isoflops", "/nonexistent/isoflops.json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bench starts");
    while child.try_wait().expect("wait").is_none() {
        if t.elapsed() > Duration::from_secs(30) {
            child.kill().expect("kill");
            panic!("bench report {args:?} still running after 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = child.wait_with_output().expect("output");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (o.status.success(), text(&o.stdout), text(&o.stderr))
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("bench-report-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

const GOOD: &str = r#"{"bench":"allreduce","backend":"cpu","world":2,"bytes":1048576,"iters":5,"time_us":1234.5,"algbw_gbs":0.85,"busbw_gbs":0.85,"correct":true,"device":"cpu"}"#;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `bench report --results R --torch T --out O`.
fn report_all(results: &Path, torch: &Path, out: &Path) -> (bool, String, String) {
    report(&[
        "--results",
        s(results),
        "--torch",
        s(torch),
        "--out",
        s(out),
    ])
}

#[test]
fn skipped_lines_are_named_and_the_good_ones_still_reported() {
    let dir = scratch("skip");
    let results = dir.join("results.jsonl");
    let lines = [
        GOOD,
        "",
        "garbage",
        r#"{"bench":"allreduce","world":"two"}"#,
        r#"{"bench":"mystery","x":1}"#,
        r#"{"bench":"rmsnorm","rows":10}"#,
        r#"{"bench":"single","size":"tiny","dtype":"fp32","step_ms":[1"#,
    ];
    std::fs::write(&results, lines.join("\n")).unwrap();
    let torch = dir.join("torch.jsonl");
    let t = r#"{"mode":"allreduce","world":2,"MiB":1.0,"ms":2.0,"busbw_GBs":1.0}"#;
    std::fs::write(&torch, format!("{t}\nnot json\n")).unwrap();
    let out = dir.join("report");
    let (ok, stdout, stderr) = report_all(&results, &torch, &out);
    assert!(ok, "a damaged file is still reported: {stdout}{stderr}");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("1234.5"), "the good record is reported:\n{md}");
    let r = s(&results);
    for (line, why) in [
        (2, "empty line"),
        (3, "not JSON"),
        (4, "not a valid bench \"allreduce\" record"),
        (5, "unknown record type"),
        (7, "truncated last line"),
    ] {
        let at = format!("{r}:{line}: {why}");
        assert!(stderr.contains(&at), "stderr lacks {at:?}:\n{stderr}");
        assert!(md.contains(&at), "report lacks {at:?}:\n{md}");
    }
    assert!(
        !stderr.contains(&format!("{r}:6:")),
        "rmsnorm is a known record: {stderr}"
    );
    assert!(
        stderr.contains(&format!("{}:2: not JSON", s(&torch))),
        "{stderr}"
    );
    assert!(md.contains("6 input lines were not used"), "{md}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_missing_torch_file_is_an_error_naming_it() {
    let dir = scratch("torch");
    let results = dir.join("results.jsonl");
    std::fs::write(&results, format!("{GOOD}\n")).unwrap();
    let torch = dir.join("no-such-torch.jsonl");
    let out = dir.join("report");
    let args = [
        "--results",
        s(&results),
        "--torch",
        s(&torch),
        "--out",
        s(&out),
    ];
    let (ok, stdout, stderr) = report(&args);
    assert!(!ok, "{stdout}{stderr}");
    assert!(
        stderr.contains(&format!("--torch {}", s(&torch))),
        "{stderr}"
    );
    assert!(!out.join("report.md").exists());
    // Without --torch the same results make a report, with nothing skipped.
    let (ok, stdout, stderr) = report(
        &args[..2]
            .iter()
            .chain(&args[4..])
            .copied()
            .collect::<Vec<_>>(),
    );
    assert!(ok && !stderr.contains("skipped"), "{stdout}{stderr}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// A one-GPU run (no all-reduce; `train run` records from run.sh train-speed beside `bench
/// single` and the PyTorch trainer): the all-reduce section says why it is absent, and the
/// `train run` table holds each strategy's ratio to `bench single`'s step without
/// clipping and, apart, to the clipped one, on the same model (train's data's vocabulary,
/// not the size's default), and to the PyTorch trainer's fastest variant.
#[test]
fn a_one_gpu_run_reports_train_against_bench_single_and_the_pytorch_trainer() {
    let dir = scratch("one-gpu");
    let results = dir.join("results.jsonl");
    let single = |ms: f64, adamw: &str, norm: &str| {
        format!(
            r#"{{"bench":"single","size":"xl","dtype":"bf16","mode":"step","params":1,"vocab":683,"batch":8,"seq":128,"steps":10,"fwd_ms":[{ms},0],"bwd_ms":[0,0],"opt_ms":[0,0],"step_ms":[{ms},0.1],"tokens_per_s":1,"mfu":null,"peak_fwd_gib":null,"peak_step_gib":null,"loss_first":1,"loss_last":1,"graph":true,"adamw":"{adamw}"{norm}}}"#
        )
    };
    let train = |st: &str, ms: f64| {
        format!(
            r#"{{"bench":"train","size":"xl","dtype":"bf16","strategy":"{st}","world":1,"batch":8,"seq":128,"vocab":683,"steps":35,"step_ms":{ms},"tokens_per_s":1,"graph":true,"adamw":"after","norm":"after"}}"#
        )
    };
    let lines = [
        single(40.0, "in-backward", ""),
        // The size's own vocabulary (no "vocab": older records): another model, not used.
        single(30.0, "in-backward", "").replace(r#""vocab":683,"#, ""),
        single(42.0, "after", r#","norm":"after""#),
        train("single", 41.0),
        train("zero1", 41.2),
    ];
    std::fs::write(&results, lines.join("\n")).unwrap();
    let torch = dir.join("torch.jsonl");
    let tt = |v: &str, ms: f64| {
        format!(
            r#"{{"mode":"train-best","world":1,"size":"xl","dtype":"bf16","variant":"{v}","step_ms":{ms},"peak_GiB":30.0}}"#
        )
    };
    std::fs::write(
        &torch,
        [tt("compile", 90.0), tt("compile-ro", 50.0)].join("\n"),
    )
    .unwrap();
    let out = dir.join("report");
    let (ok, stdout, stderr) = report_all(&results, &torch, &out);
    assert!(ok, "{stdout}{stderr}");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("No all-reduce in this run: it needs at least 2 GPUs"),
        "{md}"
    );
    assert!(
        md.contains(
            "| xl | bf16 | single | 1 | 8 | 41.00 | 1.025 | 0.976 | 50.00 | 0.820 | yes | after | after |"
        ),
        "{md}"
    );
    assert!(
        md.contains("| xl | bf16 | zero1 | 1 | 8 | 41.20 | 1.030 | 0.981 | 50.00 | 0.824 |"),
        "{md}"
    );
    assert!(out.join("train-vs-pytorch.svg").exists());
    assert!(
        !stderr.contains("unknown record type"),
        "every line is used: {stderr}"
    );
}

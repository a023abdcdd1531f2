//! End-to-end runs of the binary: JSON shape on the shipped data, clean errors on bad files.

use std::path::PathBuf;
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_scaling-laws"))
}

fn data_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/isoflops_curves.json")
}

#[test]
fn json_report_has_the_documented_shape() {
    let plots = std::env::temp_dir().join(format!("scaling-laws-plots-{}", std::process::id()));
    let out = bin()
        .args(["fit", "--json", "--resamples", "20", "--plots"])
        .arg(&plots)
        .arg(data_file())
        .output()
        .expect("run binary");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    for key in ["approach1", "approach2"] {
        for field in ["n_coefficient", "n_exponent", "d_coefficient", "d_exponent"] {
            assert!(v[key][field].is_f64(), "{key}.{field}");
        }
        let preds = v[key]["predictions"].as_array().expect("predictions");
        assert_eq!(preds[0]["compute"].as_f64(), Some(1e23));
        assert_eq!(preds[1]["compute"].as_f64(), Some(1e24));
        assert!(preds[1]["n_opt"].is_f64() && preds[1]["d_opt"].is_f64());
    }
    for field in ["E", "A", "B", "alpha", "beta"] {
        assert!(v["approach3"][field].is_f64(), "approach3.{field}");
    }
    assert_eq!(
        v["approach3"]["predictions"].as_array().map(Vec::len),
        Some(2)
    );
    for svg in ["n_opt.svg", "d_opt.svg", "isoflop_profiles.svg"] {
        let text = std::fs::read_to_string(plots.join(svg)).expect(svg);
        assert!(text.starts_with("<svg"), "{svg}");
    }
    let _ = std::fs::remove_dir_all(&plots);
}

#[test]
fn bad_file_fails_cleanly_naming_the_record() {
    let path = std::env::temp_dir().join(format!("scaling-laws-bad-{}.json", std::process::id()));
    std::fs::write(
        &path,
        r#"[{"parameters": 1e8, "compute_budget": 1e19, "final_loss": 3.5},
            {"parameters": 2e8, "compute_budget": -1e19, "final_loss": 3.4}]"#,
    )
    .expect("write temp file");
    let out = bin().arg("fit").arg(&path).output().expect("run binary");
    let _ = std::fs::remove_file(&path);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("record 1") && err.contains("compute_budget"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn empty_file_fails_cleanly() {
    let path = std::env::temp_dir().join(format!("scaling-laws-empty-{}.json", std::process::id()));
    std::fs::write(&path, "").expect("write temp file");
    let out = bin().arg("fit").arg(&path).output().expect("run binary");
    let _ = std::fs::remove_file(&path);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("empty") && !err.contains("panicked"), "{err}");
}

fn run_with_timeout(mut cmd: Command, secs: u64) -> std::process::Output {
    use std::sync::mpsc;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(cmd.output());
    });
    rx.recv_timeout(std::time::Duration::from_secs(secs))
        .expect("binary finished in time")
        .expect("run binary")
}

#[test]
fn size_flags_are_bounded_naming_the_flag() {
    let cases = [
        (
            vec!["--resamples", "1000000000000"],
            "--resamples",
            "0..=100000",
        ),
        (vec!["--starts", "5000"], "--starts", "0..=4500"),
        (
            vec!["--bench-timing", "100000"],
            "--bench-timing",
            "1..=1000",
        ),
    ];
    for (args, flag, bound) in cases {
        let mut cmd = bin();
        cmd.arg("fit").args(&args).arg(data_file());
        let out = run_with_timeout(cmd, 20);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} accepted");
        assert!(err.contains(flag) && err.contains(bound), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let mut cmd = bin();
    cmd.args(["fit", "--help"]);
    let help = String::from_utf8_lossy(&run_with_timeout(cmd, 20).stdout).to_string();
    assert!(help.contains("0 to 100000"), "{help}");
    assert!(
        help.contains("0 to 4500") && help.contains("1 to 1000"),
        "{help}"
    );

    // The library refuses too.
    let runs = scaling_laws::data::load_runs(&data_file()).expect("data");
    let mut opts = scaling_laws::pipeline::Options::default();
    opts.bootstrap.resamples = scaling_laws::pipeline::MAX_RESAMPLES + 1;
    let err = scaling_laws::pipeline::analyze(&runs, &opts).expect_err("bounded");
    assert!(err.to_string().contains("at most 100000"), "{err}");
}

#[test]
fn duplicates_are_named_on_stderr_and_a_clean_fit_warns_of_nothing() {
    let text = std::fs::read_to_string(data_file()).expect("data");
    let mut records: Vec<serde_json::Value> = serde_json::from_str(&text).expect("json");
    records.push(records[3].clone());
    let path = std::env::temp_dir().join(format!("scaling-laws-dup-{}.json", std::process::id()));
    std::fs::write(&path, serde_json::to_string(&records).expect("json")).expect("write");
    let mut cmd = bin();
    cmd.args(["fit", "--resamples", "10"]).arg(&path);
    let out = run_with_timeout(cmd, 60);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("1 record(s) repeat earlier ones") && err.contains("were dropped"),
        "{err}"
    );
    assert!(
        err.contains("record 72 (parameters=") && err.contains("repeats record 3"),
        "{err}"
    );
    assert!(stdout.contains("72 runs, 9 compute budgets"), "{stdout}");

    let mut cmd = bin();
    cmd.args(["fit", "--duplicates", "refuse", "--resamples", "10"])
        .arg(&path);
    let out = run_with_timeout(cmd, 60);
    let _ = std::fs::remove_file(&path);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("repeats record 3"), "{err}");

    // A clean fit writes no warning on stderr. Progress lines come only when a stage runs
    // past progress::QUIET_FOR, which a loaded machine can make it do: they are left out
    // here (when they print is progress.rs's unit test, on a clock it controls).
    let mut cmd = bin();
    cmd.args(["fit", "--resamples", "10"]).arg(data_file());
    let out = run_with_timeout(cmd, 60);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let progress = |l: &str| {
        ["approach 3 starts: ", "bootstrap"]
            .iter()
            .any(|p| l.starts_with(p))
            && (l.contains(" s elapsed, ~") || l.contains(" done in "))
    };
    let other: Vec<&str> = err.lines().filter(|l| !progress(l)).collect();
    assert!(other.is_empty(), "{err}");
}

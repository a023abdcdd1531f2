//! Bad `bench` flags fail fast with an error naming them, before the run starts or
//! allocates: an unusable `--out` (a directory, a path under a regular file, /proc), a
//! failed write during the run, and sizes, batches, rank and step counts that cannot fit.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs bench with `args`, killed after `limit`: (success, stdout, stderr, elapsed).
fn bench(args: &[&str], limit: Duration) -> (bool, String, String, Duration) {
    let t = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(args)
        .env("COMM_TIMEOUT_S", "20")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bench starts");
    while child.try_wait().expect("wait").is_none() {
        if t.elapsed() > limit {
            child.kill().expect("kill");
            panic!("bench {args:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = child.wait_with_output().expect("output");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (
        o.status.success(),
        text(&o.stdout),
        text(&o.stderr),
        t.elapsed(),
    )
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("bench-bad-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Every subcommand that writes results, with flags for a quick CPU run.
const WRITERS: &[&[&str]] = &[
    &[
        "allreduce",
        "--ranks",
        "2",
        "--sizes-mib",
        "0.5",
        "--iters",
        "1",
    ],
    &[
        "single", "--cpu", "--size", "tiny", "--warmup", "0", "--steps", "1",
    ],
    &[
        "ddp",
        "--ranks",
        "2",
        "--size",
        "tiny",
        "--strategies",
        "naive",
        "--steps",
        "1",
    ],
    &["zero1", "--ranks", "2", "--modes", "ddp", "--steps", "1"],
    &["profile", "--cpu", "--size", "tiny"],
    &["rmsnorm", "--rows", "10"],
    &["contention", "--size", "tiny", "--batch", "1"],
];

#[test]
fn an_unusable_out_fails_before_the_run_naming_it() {
    let dir = scratch("out");
    let file = dir.join("file");
    std::fs::write(&file, "").unwrap();
    let under_file = file.join("sub.jsonl");
    let outs: [&Path; 3] = [&dir, &under_file, Path::new("/proc/bench-results.jsonl")];
    for args in WRITERS {
        for out in outs {
            let out = out.to_str().unwrap();
            let mut a = args.to_vec();
            a.extend(["--out", out]);
            if args[0] == "profile" {
                a.extend(["--svg-dir", dir.to_str().unwrap()]);
            }
            let (ok, stdout, stderr, t) = bench(&a, Duration::from_secs(20));
            assert!(!ok, "{a:?} succeeded: {stdout}{stderr}");
            assert!(stderr.contains(&format!("--out {out}")), "{a:?}: {stderr}");
            assert!(stdout.is_empty(), "{a:?} ran before failing: {stdout}");
            assert!(t < Duration::from_secs(5), "{a:?} took {t:?}");
        }
    }
    // The other places a run writes to, checked the same way.
    let out = dir.join("r.jsonl");
    let under = under_file.to_str().unwrap();
    for (a, flag) in [
        (
            vec!["profile", "--cpu", "--size", "tiny", "--svg-dir", under],
            "--svg-dir",
        ),
        (
            vec!["ddp", "--backend", "nccl", "--trace-dir", under],
            "--trace-dir",
        ),
    ] {
        let mut a = a.clone();
        a.extend(["--out", out.to_str().unwrap()]);
        let (ok, stdout, stderr, t) = bench(&a, Duration::from_secs(20));
        assert!(
            !ok && stderr.contains(&format!("{flag} {under}")),
            "{a:?}: {stderr}"
        );
        assert!(
            stdout.is_empty() && t < Duration::from_secs(5),
            "{a:?}: {stdout}"
        );
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"", "the file is untouched");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_failed_write_during_the_run_is_an_error_naming_the_file() {
    if !Path::new("/dev/full").exists() {
        return; // not Linux
    }
    for args in &WRITERS[..2] {
        let mut a = args.to_vec();
        a.extend(["--out", "/dev/full"]);
        let (ok, stdout, stderr, _) = bench(&a, Duration::from_secs(20));
        assert!(!ok, "{a:?} succeeded: {stdout}{stderr}");
        assert!(stderr.contains("--out /dev/full"), "{a:?}: {stderr}");
        assert!(!stderr.contains("warning"), "{stderr}");
    }
}

#[test]
fn sizes_that_cannot_fit_are_refused_naming_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (&["allreduce", "--sizes-mib", "1e12"], "--sizes-mib"),
        (&["allreduce", "--sizes-mib", "1e30"], "--sizes-mib"),
        (
            &["allreduce", "--sizes-mib", "0.5,400000", "--ranks", "2"],
            "--sizes-mib 400000 × --ranks 2",
        ),
        (
            &["allreduce", "--sizes-mib", "1", "--ranks", "2,0"],
            "--ranks",
        ),
        (
            &["single", "--cpu", "--batch", "1000000000"],
            "--batch 1000000000",
        ),
        (
            &["single", "--cpu", "--batch", "18446744073709551615"],
            "--batch",
        ),
        (&["ddp", "--ranks", "1000"], "--ranks"),
        (
            &["ddp", "--ranks", "200", "--batch", "100000"],
            "--ranks 200 × --batch 100000",
        ),
        (
            &["zero1", "--ranks", "2", "--batch", "100000000"],
            "--ranks 2 × --batch 100000000",
        ),
        (
            &["single", "--cpu", "--size", "tiny", "--vocab", "1000000000"],
            "--vocab 1000000000",
        ),
        (&["single", "--cpu", "--vocab", "0"], "--vocab"),
        (&["single", "--cpu", "--steps", "0"], "--steps"),
        (&["ddp", "--warmup", "1000000000000"], "--warmup"),
        (&["zero1", "--steps", "1000000000000"], "--steps"),
        (&["allreduce", "--iters", "0"], "--iters"),
        (&["rmsnorm", "--rows", "0"], "--rows"),
        (&["adamw", "--size", "huge"], "--size huge"),
        (&["adamw", "--iters", "0"], "--iters"),
    ];
    let dir = scratch("flags");
    let out = dir.join("r.jsonl");
    for (args, flag) in cases {
        let mut a = args.to_vec();
        a.extend(["--out", out.to_str().unwrap()]);
        let (ok, stdout, stderr, t) = bench(&a, Duration::from_secs(20));
        assert!(!ok, "{a:?} succeeded: {stdout}{stderr}");
        assert!(stderr.contains(flag), "{a:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{a:?}: {stderr}");
        assert!(t < Duration::from_secs(5), "{a:?} took {t:?}");
        assert!(!out.exists(), "{a:?} opened --out before refusing");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn zero1_check_sizes_are_refused_naming_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (&["--ranks", "1000"], "--ranks"),
        (&["--steps", "1000000000000"], "--steps"),
        (&["--save-at", "0"], "--save-at"),
        (&["--global-batch", "100000000"], "--global-batch"),
    ];
    let dir = scratch("zero1-check");
    let ck = dir.join("ck");
    for (args, flag) in cases {
        let mut a = vec!["zero1-check", "--dir", ck.to_str().unwrap()];
        a.extend_from_slice(args);
        let (ok, stdout, stderr, t) = bench(&a, Duration::from_secs(20));
        assert!(!ok, "{a:?} succeeded: {stdout}{stderr}");
        assert!(stderr.contains(flag), "{a:?}: {stderr}");
        assert!(t < Duration::from_secs(5), "{a:?} took {t:?}");
        assert!(!ck.exists(), "{a:?} created --dir before refusing");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// A CPU build asked for NCCL says it was built without CUDA (it asked for RANK).
#[cfg(not(feature = "cuda"))]
#[test]
fn ddp_check_on_nccl_in_a_cpu_build_says_it_was_built_without_cuda() {
    let o = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(["ddp-check", "--backend", "nccl", "--model", "toy"])
        .env_remove("RANK")
        .output()
        .expect("bench starts");
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        e.contains("without the `cuda` feature") && !e.contains("RANK"),
        "{e}"
    );
}

/// A CPU build asked to time AdamW's kernel says it was built without CUDA, and writes no
/// results file.
#[cfg(not(feature = "cuda"))]
#[test]
fn adamw_in_a_cpu_build_says_it_was_built_without_cuda() {
    let dir = scratch("adamw");
    let out = dir.join("r.jsonl");
    let (ok, stdout, stderr, _) = bench(
        &["adamw", "--size", "tiny", "--out", out.to_str().unwrap()],
        Duration::from_secs(20),
    );
    assert!(!ok, "{stdout}{stderr}");
    assert!(stderr.contains("without the `cuda` feature"), "{stderr}");
    assert!(!out.exists(), "bench adamw opened --out before refusing");
    std::fs::remove_dir_all(dir).unwrap();
}

/// bench ddp-check refuses at once an LM its ranks cannot hold (the ddp-train binary it
/// replaced was OOM-killed after 46 s).
#[test]
fn ddp_check_refuses_a_model_that_cannot_fit_before_building_it() {
    let t = Instant::now();
    let o = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args([
            "ddp-check",
            "--backend",
            "cpu",
            "--ranks",
            "256",
            "--model",
            "2.7B",
        ])
        .env_remove("RANK")
        .output()
        .expect("bench starts");
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(e.contains("--model 2.7B") && e.contains("of memory"), "{e}");
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "after {:?}",
        t.elapsed()
    );
}

/// `ddp-check --steps 0` compared no trained weights and said OK; now refused.
#[test]
fn ddp_check_refuses_zero_steps() {
    let (ok, stdout, stderr, _) = bench(
        &["ddp-check", "--backend", "cpu", "--steps", "0"],
        Duration::from_secs(60),
    );
    assert!(!ok, "{stdout}{stderr}");
    assert!(stderr.contains("--steps"), "{stderr}");
}

/// Without `--backend` (or `--cpu`), bench's subcommands take the GPU where it was built
/// with CUDA and one is visible; this CPU build takes the CPU and says why, once.
#[test]
fn without_a_backend_a_cpu_build_runs_on_the_cpu_saying_why() {
    let d = scratch("auto");
    let out = d.join("r.jsonl");
    let (ok, _, e, _) = bench(
        &[
            "single",
            "--size",
            "tiny",
            "--mode",
            "step",
            "--warmup",
            "1",
            "--steps",
            "1",
            "--out",
            out.to_str().unwrap(),
        ],
        Duration::from_secs(120),
    );
    assert!(ok, "{e}");
    assert_eq!(
        e.matches("bench: device: cpu (built without CUDA").count(),
        1,
        "{e}"
    );
    let o = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args([
            "ddp-check",
            "--model",
            "toy",
            "--ranks",
            "2",
            "--steps",
            "2",
        ])
        .env_remove("RANK")
        .output()
        .expect("bench starts");
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{e}");
    assert_eq!(
        e.matches("bench: device: cpu (built without CUDA").count(),
        1,
        "{e}"
    );
}

/// `bench single --gemm-choices`: a missing file, a file that is not a table, and (on the
/// CPU) any table are refused naming the flag's file, before the run; so is
/// `--save-gemm-choices` off CUDA.
#[test]
fn gemm_tables_that_cannot_be_used_are_refused_naming_them() {
    let dir = scratch("gemm");
    let t = dir.join("table.json");
    let ts = t.to_str().unwrap();
    let r = dir.join("r.jsonl");
    let rs = r.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut a = vec![
            "single", "--cpu", "--size", "tiny", "--warmup", "0", "--steps", "1",
        ];
        a.extend_from_slice(&["--out", rs]);
        a.extend_from_slice(extra);
        bench(&a, Duration::from_secs(60))
    };
    let (ok, _, e, _) = run(&["--gemm-choices", ts]);
    assert!(!ok && e.contains(ts) && e.contains("reading"), "{e}");
    std::fs::write(&t, "{}").unwrap();
    let (ok, _, e, _) = run(&["--gemm-choices", ts]);
    assert!(
        !ok && e.contains(ts) && e.contains("not a GEMM choice table"),
        "{e}"
    );
    std::fs::write(
        &t,
        r#"{"identity":"NVIDIA H100 80GB HBM3, cuBLASLt 130100","choices":[]}"#,
    )
    .unwrap();
    let (ok, _, e, _) = run(&["--gemm-choices", ts]);
    assert!(!ok && e.contains(ts) && e.contains("CUDA"), "{e}");
    assert!(!r.exists(), "a refused table still ran");
    let saved = dir.join("saved.json");
    let (ok, _, e, _) = run(&["--save-gemm-choices", saved.to_str().unwrap()]);
    assert!(!ok && e.contains("--save-gemm-choices"), "{e}");
    assert!(!r.exists(), "refused, it still ran");
    std::fs::remove_dir_all(dir).unwrap();
}

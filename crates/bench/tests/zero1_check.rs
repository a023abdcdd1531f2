//! `bench zero1-check` on the CPU backend (the same code runs on NCCL through the device
//! tool): a checkpoint resumed with another bucket layout continues the same trajectory;
//! `--dir` is never deleted or emptied (issue 22, item 1); `--tol` is validated.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("bench-zero1-check-{name}-{}", std::process::id()))
}

/// Runs `bench ARGS --dir DIR`, killed after 150 s (a refused --dir used to wait 300 s).
fn bench_in(args: &[&str], dir: &Path) -> (bool, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(args)
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bench runs");
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > Duration::from_secs(150) {
            let _ = child.kill();
            panic!("bench {args:?} --dir {} ran past 150 s", dir.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

fn bench(args: &[&str]) -> (bool, String) {
    let dir = tmp("run");
    let r = bench_in(args, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    r
}

#[test]
fn resumed_training_matches_on_two_and_four_ranks() {
    for ranks in ["2", "4"] {
        let dir = tmp(&format!("ranks{ranks}"));
        let args = [
            "zero1-check",
            "--backend",
            "cpu",
            "--ranks",
            ranks,
            "--global-batch",
            "4",
        ];
        let (ok, text) = bench_in(&args, &dir);
        assert!(ok, "{text}");
        assert!(
            text.contains(&format!("world {ranks}")) && text.contains(": OK"),
            "{text}"
        );
        // It created the directory, so it removes it with the checkpoint.
        assert!(!dir.exists(), "{} left behind", dir.display());
    }
}

#[test]
fn a_non_empty_dir_is_refused_by_name_and_left_untouched() {
    let dir = tmp("full");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("notes.txt"), b"mine").unwrap();
    std::fs::write(dir.join("sub/data.bin"), b"also mine").unwrap();
    let (ok, text) = bench_in(&["zero1-check", "--ranks", "2"], &dir);
    assert!(!ok, "{text}");
    assert!(
        text.contains(&format!("--dir {}: not empty", dir.display())),
        "{text}"
    );
    assert_eq!(std::fs::read(dir.join("notes.txt")).unwrap(), b"mine");
    assert_eq!(
        std::fs::read(dir.join("sub/data.bin")).unwrap(),
        b"also mine"
    );
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_dir_that_is_a_file_is_refused_at_once_by_name() {
    let file = tmp("file");
    std::fs::write(&file, b"not a directory").unwrap();
    let t0 = Instant::now();
    let (ok, text) = bench_in(&["zero1-check", "--ranks", "2"], &file);
    assert!(!ok, "{text}");
    assert!(
        text.contains(&format!(
            "--dir {}: exists and is not a directory",
            file.display()
        )),
        "{text}"
    );
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "took {:?}",
        t0.elapsed()
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"not a directory");
    std::fs::remove_file(&file).unwrap();
}

#[test]
fn an_empty_dir_is_used_and_kept() {
    let dir = tmp("empty");
    std::fs::create_dir_all(&dir).unwrap();
    let short = ["--steps", "2", "--save-at", "1", "--global-batch", "2"];
    let (ok, text) = bench_in(
        &[&["zero1-check", "--ranks", "2"][..], &short].concat(),
        &dir,
    );
    assert!(ok && text.contains(": OK"), "{text}");
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "checkpoint left"
    );
    std::fs::remove_dir(&dir).unwrap();
}

#[test]
fn bad_arguments_name_themselves() {
    let (ok, text) = bench(&["zero1-check", "--save-at", "6"]);
    assert!(!ok && text.contains("--save-at 6"), "{text}");
    let (ok, text) = bench(&["zero1-check", "--ranks", "3"]);
    assert!(
        !ok && text.contains("not divisible by the world size 3"),
        "{text}"
    );
    for tol in ["-1e-6", "NaN"] {
        let (ok, text) = bench(&["zero1-check", &format!("--tol={tol}")]);
        assert!(
            !ok && text.contains("--tol ") && text.contains("finite number >= 0"),
            "{text}"
        );
    }
}

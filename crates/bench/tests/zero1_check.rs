//! `bench zero1-check` on the CPU backend (the same code runs on NCCL through the device
//! tool): a checkpoint resumed with another bucket layout continues the same trajectory.

use std::process::Command;

fn bench(args: &[&str]) -> (bool, String) {
    let dir = std::env::temp_dir().join(format!("bench-zero1-check-{}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(args)
        .arg("--dir")
        .arg(&dir)
        .output()
        .expect("bench runs");
    let _ = std::fs::remove_dir_all(&dir);
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn resumed_training_matches_on_two_and_four_ranks() {
    for ranks in ["2", "4"] {
        let (ok, text) = bench(&["zero1-check", "--backend", "cpu", "--ranks", ranks]);
        assert!(ok, "{text}");
        assert!(
            text.contains(&format!("world {ranks}")) && text.contains(": OK"),
            "{text}"
        );
    }
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
}

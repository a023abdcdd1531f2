//! `bench single --adamw` on the CPU: the default (auto) runs AdamW inside the backward
//! there and says so in the record; in the backward and after it give the same losses bit
//! for bit; a second stream is refused on the CPU naming the flag.

use std::process::Command;

/// Runs `bench single --cpu --size tiny` for 3 steps with `extra`: (success, the record's
/// JSON, stderr).
fn single(name: &str, extra: &[&str]) -> (bool, Option<serde_json::Value>, String) {
    let dir = std::env::temp_dir().join(format!("bench-adamw-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("results.jsonl");
    let o = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(["single", "--cpu", "--size", "tiny", "--batch", "2"])
        .args(["--warmup", "0", "--steps", "3", "--out"])
        .arg(&out)
        .args(extra)
        .output()
        .expect("bench runs");
    let rec = std::fs::read_to_string(&out)
        .ok()
        .and_then(|s| s.lines().next().map(|l| serde_json::from_str(l).unwrap()));
    let _ = std::fs::remove_dir_all(&dir);
    (
        o.status.success(),
        rec,
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

#[test]
fn auto_runs_adamw_in_the_backward_on_the_cpu_with_the_losses_of_adamw_after_it() {
    let (ok, auto, err) = single("auto", &[]);
    assert!(ok, "{err}");
    let auto = auto.expect("a record");
    assert_eq!(auto["adamw"], "in-backward", "{auto}");
    let (ok, after, err) = single("after", &["--adamw", "after"]);
    assert!(ok, "{err}");
    let after = after.expect("a record");
    assert_eq!(after["adamw"], "after");
    // Step 1's update decides step 2's loss, and so on: equal losses mean equal updates.
    for k in ["loss_first", "loss_last"] {
        let (a, b) = (auto[k].as_f64().unwrap(), after[k].as_f64().unwrap());
        assert!(a.is_finite() && a == b, "{k}: in backward {a}, after {b}");
    }
    assert_ne!(auto["loss_first"], auto["loss_last"], "AdamW moved nothing");
}

#[test]
fn a_second_stream_on_the_cpu_is_refused_naming_the_flag() {
    let (ok, rec, err) = single("side", &["--adamw", "side-stream"]);
    assert!(!ok && rec.is_none(), "ran: {rec:?}");
    assert!(
        err.contains("--adamw side-stream") && err.contains("CUDA"),
        "{err}"
    );
}

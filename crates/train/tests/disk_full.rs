//! A disk that fills up during a run (issue 34 item 8), on a real tmpfs where root may
//! mount one (elsewhere the test says it is skipped and passes): the run fails naming a
//! file under `--out`; once there is space again (the tmpfs remounted larger) the same
//! command resumes from the newest complete checkpoint and finishes, and its log reads
//! back with every step once.

mod common;

use common::cli::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs mounted at a fresh directory, unmounted on drop (also when the test fails).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        let dir = std::env::temp_dir().join(format!("train-disk-full-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        let o = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .output()
            .ok()?;
        if !o.status.success() {
            eprintln!(
                "skipped: cannot mount a tmpfs here ({})",
                String::from_utf8_lossy(&o.stderr).trim()
            );
            let _ = std::fs::remove_dir(&dir);
            return None;
        }
        Some(Tmpfs(dir))
    }

    fn grow(&self, size: &str) {
        let o = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.0)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "remount: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn a_full_disk_fails_naming_the_file_and_the_run_resumes_once_there_is_space() {
    // 8 MiB: the nano model's checkpoints (~2.3 MB each, every 2 steps) fill it in a few.
    let Some(fs) = Tmpfs::mount("8m") else {
        return;
    };
    let out = fs.path().join("run");
    let args = [
        "--steps",
        "30",
        "--ckpt-every",
        "2",
        "--keep",
        "30",
        "--eval-every",
        "10",
        "--warmup",
        "5",
    ];
    let o = run(&out, &args);
    let e = stderr(&o);
    assert!(!o.status.success(), "a run on a full disk exited 0: {e}");
    assert!(
        e.contains("No space left on device") && e.contains(out.to_str().unwrap()),
        "the error names the file under --out: {e}"
    );
    let before = checkpoints(&out);
    assert!(
        !before.is_empty() && *before.last().unwrap() < 30,
        "{before:?}"
    );
    fs.grow("64m");
    let e = ok(&out, &args);
    // Resumed, not restarted: every step logged once (a restart would log 1.. again).
    assert_eq!(logged_steps(&out), (1..=30).collect::<Vec<u64>>(), "{e}");
    let after = checkpoints(&out);
    assert!(
        before.iter().all(|s| after.contains(s)),
        "{before:?} kept: {after:?}"
    );
    assert_eq!(after.last(), Some(&30));
}

//! The run directory (`--out`) belongs to one run at a time.
//!
//! - [`lock`]: an advisory lock (`flock`) on `out/.train.lock`, which holds the holder's
//!   pid, host and start time. A second run on the same directory is refused at once,
//!   naming the holder. The kernel releases the lock when the holder exits, however it
//!   exits, so a lock left by a killed run is taken over (and said so).
//! - [`move_aside`]: `--fresh` never deletes a run: the previous run's files move into
//!   `out/previous-N/`, and the new run starts in a clean directory.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

pub const LOCK_FILE: &str = ".train.lock";

/// What a run leaves in its directory (all of it moves aside on `--fresh`).
pub const RUN_FILES: [&str; 6] = [
    "checkpoints",
    "log.jsonl",
    crate::export::CONFIG_FILE,
    crate::export::INIT_FILE,
    "loss.svg",
    "samples.txt",
];

#[derive(Debug, Serialize, Deserialize)]
struct Holder {
    pid: u32,
    host: String,
    /// Seconds since the Unix epoch.
    started: u64,
}

impl Holder {
    fn describe(&self) -> String {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        format!(
            "pid {} on host {}, started {} s ago",
            self.pid,
            self.host,
            now.saturating_sub(self.started)
        )
    }
}

/// This machine's name ("unknown" where it cannot be read).
pub(crate) fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// The lock of a run directory, held until dropped (or the process ends).
pub struct RunLock {
    file: File,
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // Nothing stale for the next run to report; the lock goes with the file handle.
        let _ = self.file.set_len(0);
    }
}

/// Rank 0's hold on `out` for a run (`None` on the other ranks): its lock, one run at a
/// time; with `fresh` (`--fresh`), the previous run's files moved aside first, said on
/// stderr.
pub fn claim(rank: usize, out: &Path, fresh: bool) -> Result<Option<RunLock>> {
    if rank != 0 {
        return Ok(None);
    }
    let lock = lock(out)?;
    if fresh {
        if let Some(dest) = move_aside(out)? {
            let (o, d) = (out.display(), dest.display());
            eprintln!("train: --fresh: the previous run in {o} moved to {d}");
        }
    }
    Ok(Some(lock))
}

/// Takes `out`'s lock (creating `out`), or fails at once naming the run that holds it.
pub fn lock(out: &Path) -> Result<RunLock> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let path = out.join(LOCK_FILE);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    let mut before = String::new();
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let _ = file.read_to_string(&mut before);
            let who = serde_json::from_str::<Holder>(&before)
                .map_or("a process that has not written its name yet".into(), |h| {
                    h.describe()
                });
            bail!(
                "--out {} is in use by another training run ({who}; lock {}): wait for it to end, or give this run another --out",
                out.display(),
                path.display()
            );
        }
        Err(TryLockError::Error(e)) => {
            return Err(e).with_context(|| format!("locking {}", path.display()))
        }
    }
    file.read_to_string(&mut before)
        .with_context(|| format!("reading {}", path.display()))?;
    if let Ok(h) = serde_json::from_str::<Holder>(&before) {
        eprintln!(
            "train: taking over {} from a run that ended without releasing it ({})",
            out.display(),
            h.describe()
        );
    }
    let me = Holder {
        pid: std::process::id(),
        host: host(),
        started: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    };
    file.set_len(0)?;
    file.rewind()?;
    file.write_all(serde_json::to_string(&me)?.as_bytes())
        .and_then(|_| file.sync_all())
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(RunLock { file })
}

/// Moves the previous run's files in `out` ([`RUN_FILES`]) into a new `out/previous-N/`;
/// returns it, or `None` when there was nothing to move.
pub fn move_aside(out: &Path) -> Result<Option<PathBuf>> {
    let present: Vec<PathBuf> = RUN_FILES
        .iter()
        .map(|f| out.join(f))
        .filter(|p| p.symlink_metadata().is_ok())
        .collect();
    if present.is_empty() {
        return Ok(None);
    }
    let dest = (1..)
        .map(|k| out.join(format!("previous-{k}")))
        .find(|d| d.symlink_metadata().is_err())
        .expect("an unused name");
    std::fs::create_dir(&dest).with_context(|| format!("creating {}", dest.display()))?;
    for p in present {
        let to = dest.join(p.file_name().expect("a file name"));
        std::fs::rename(&p, &to)
            .with_context(|| format!("moving {} to {}", p.display(), to.display()))?;
    }
    Ok(Some(dest))
}

/// Removes `out` if a failed start left nothing in it but its lock and an empty
/// `checkpoints/` (the caller created it); anything else stays.
pub fn remove_if_unused(out: &Path) {
    let Ok(rd) = std::fs::read_dir(out) else {
        return;
    };
    let unused = rd.flatten().all(|e| {
        let name = e.file_name();
        name == LOCK_FILE
            || (name == "checkpoints"
                && std::fs::read_dir(e.path()).is_ok_and(|mut d| d.next().is_none()))
    });
    if unused {
        let _ = std::fs::remove_dir_all(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_is_refused_naming_the_holder_and_released_on_drop() {
        let d = tempfile::tempdir().unwrap();
        let first = lock(d.path()).unwrap();
        let e = lock(d.path()).err().unwrap().to_string();
        let pid = std::process::id().to_string();
        assert!(e.contains("in use") && e.contains(&pid), "{e}");
        drop(first);
        let _again = lock(d.path()).unwrap();
    }

    #[test]
    fn fresh_moves_every_run_file_aside_and_never_overwrites() {
        let d = tempfile::tempdir().unwrap();
        assert!(move_aside(d.path()).unwrap().is_none());
        std::fs::create_dir_all(d.path().join("checkpoints/step-00000002")).unwrap();
        std::fs::write(d.path().join("log.jsonl"), "old\n").unwrap();
        let p1 = move_aside(d.path()).unwrap().unwrap();
        assert!(p1.ends_with("previous-1"));
        assert!(p1.join("checkpoints/step-00000002").is_dir());
        assert!(!d.path().join("log.jsonl").exists());
        std::fs::write(d.path().join("log.jsonl"), "newer\n").unwrap();
        let p2 = move_aside(d.path()).unwrap().unwrap();
        assert!(p2.ends_with("previous-2"));
        assert_eq!(
            std::fs::read_to_string(p1.join("log.jsonl")).unwrap(),
            "old\n"
        );
    }
}

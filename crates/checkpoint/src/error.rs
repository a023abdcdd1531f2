//! Errors of the checkpoint crate: each names the file, or the rank that failed.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// A file (or the directory) is missing, corrupt, from another save, or unwritable.
    #[error("checkpoint {}: {msg}", path.display())]
    File { path: PathBuf, msg: String },
    /// Another rank failed a phase of the save; every rank reports it.
    #[error("checkpoint {}: {phase} failed on rank {rank}: {msg} (seen on rank {seen})", dir.display())]
    Peer {
        dir: PathBuf,
        phase: &'static str,
        rank: usize,
        seen: usize,
        msg: String,
    },
    #[error(transparent)]
    Comm(#[from] comm::CommError),
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
}

pub type Result<T, E = CheckpointError> = std::result::Result<T, E>;

/// An error naming `path`.
pub fn bad(path: &Path, msg: impl std::fmt::Display) -> CheckpointError {
    CheckpointError::File {
        path: path.to_path_buf(),
        msg: msg.to_string(),
    }
}

//! The one error type of the crate: every failure names what went wrong and where.

use std::time::Duration;

/// Errors of rendezvous, collectives and launching.
#[derive(Debug, thiserror::Error)]
pub enum CommError {
    /// A required or malformed environment variable (torchrun / Slurm conventions).
    #[error("environment variable {name}: {msg}")]
    Env { name: String, msg: String },

    /// Bad arguments to a collective (shape, dtype, device, root, contiguity).
    #[error("{op} on rank {rank}: {msg}")]
    InvalidArgument {
        op: &'static str,
        rank: usize,
        msg: String,
    },

    /// The launcher's own failure: a bad flag, a rank that could not start or failed.
    #[error("{0}")]
    Launch(String),

    /// Ranks called the same collective with buffers that do not match.
    #[error("{op}: ranks disagree on their buffers: {detail}")]
    Mismatch { op: &'static str, detail: String },

    /// Some ranks did not arrive within the timeout.
    #[error("{what} on rank {rank} timed out after {timeout:?}: missing ranks {missing:?}")]
    Timeout {
        what: String,
        rank: usize,
        timeout: Duration,
        missing: Vec<usize>,
    },

    /// The group is unusable because an earlier collective failed on some rank.
    #[error("rank {rank}: process group is broken: {reason}")]
    Broken { rank: usize, reason: String },

    /// The rendezvous store failed (connect, protocol, peer abort).
    #[error("rendezvous at {addr}: {msg}")]
    Store { addr: String, msg: String },

    /// An NCCL call failed; carries NCCL's own message.
    #[error("NCCL {call} failed on rank {rank}: {code} ({msg})")]
    Nccl {
        call: &'static str,
        rank: usize,
        code: String,
        msg: String,
    },

    /// A collective did not complete in time (a peer failed, hung or never called it).
    #[error("{op} (collective #{seq}) on rank {rank} did not complete within {timeout:?}: a peer rank failed, hung, or never called it")]
    CollectiveTimeout {
        op: &'static str,
        seq: u64,
        rank: usize,
        timeout: Duration,
    },

    /// A CUDA driver call failed.
    #[error("CUDA {call} failed: {msg}")]
    Cuda { call: &'static str, msg: String },

    /// The backend is not available in this build or on this machine.
    #[error("backend {backend} unavailable: {msg}")]
    Unavailable { backend: &'static str, msg: String },

    /// The launcher got a signal (SIGINT, SIGTERM, SIGHUP) and stopped the ranks.
    #[error("launch interrupted by {signal}: {detail}")]
    Interrupted {
        signal: &'static str,
        signo: i32,
        detail: String,
    },

    /// Errors from candle (tensor access, CUDA driver via candle).
    #[error(transparent)]
    Candle(#[from] candle_core::Error),

    #[error(transparent)]
    Io(#[from] std::io::Error),
}

pub type Result<T, E = CommError> = std::result::Result<T, E>;

impl CommError {
    pub(crate) fn invalid(op: &'static str, rank: usize, msg: impl Into<String>) -> Self {
        CommError::InvalidArgument {
            op,
            rank,
            msg: msg.into(),
        }
    }
}

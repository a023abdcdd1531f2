//! Errors of the ddp crate: each names the input or the rank that is wrong.

#[derive(Debug, thiserror::Error)]
pub enum DdpError {
    /// Bad options or batches on this rank.
    #[error("ddp: {0}")]
    Input(String),
    /// Ranks disagree (different models or options); every rank reports it.
    #[error("ddp: ranks disagree: {0}")]
    Mismatch(String),
    #[error(transparent)]
    Comm(#[from] comm::CommError),
    #[error(transparent)]
    Model(#[from] seam::ModelError),
    #[error(transparent)]
    Checkpoint(#[from] checkpoint::CheckpointError),
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
}

pub type Result<T, E = DdpError> = std::result::Result<T, E>;

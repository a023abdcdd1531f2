//! Errors of the zero1 crate: each names the input or the rank that is wrong.

#[derive(Debug, thiserror::Error)]
pub enum Zero1Error {
    /// Bad parameter groups or gradients on this rank.
    #[error("zero1: {0}")]
    Input(String),
    /// Ranks disagree on the parameter groups; every rank reports it.
    #[error("zero1: ranks disagree: {0}")]
    Mismatch(String),
    #[error(transparent)]
    Comm(#[from] comm::CommError),
    #[error(transparent)]
    Model(#[from] seam::ModelError),
    #[error(transparent)]
    Ddp(#[from] ddp::DdpError),
    #[error(transparent)]
    Checkpoint(#[from] checkpoint::CheckpointError),
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
}

pub type Result<T, E = Zero1Error> = std::result::Result<T, E>;

//! Errors of the model crate: bad configurations and bad inputs name the offending value.

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("model config: {0}")]
    Config(String),
    #[error("input: {0}")]
    Input(String),
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
}

pub type Result<T, E = ModelError> = std::result::Result<T, E>;

//! The models the benchmarks train, on candle.
//!
//! How to use:
//! ```no_run
//! use model::{Batch, LmConfig, StagedModel, TransformerLm, AdamW, AdamWConfig, forward_backward};
//! # fn main() -> model::Result<()> {
//! let dev = candle_core::Device::Cpu;
//! let lm = TransformerLm::new(LmConfig::by_name("small")?, 0, &dev)?;
//! let input = lm.tokens(&vec![1u32; 2 * 128], 2, &dev)?;
//! let targets = lm.tokens(&vec![2u32; 2 * 128], 2, &dev)?;
//! let batch = Batch { input, targets };
//! let mut opt = AdamW::new(AdamWConfig::default())?;
//! // Staged backward: the callback sees each stage's gradients as soon as they are final.
//! let (loss, grads) = forward_backward(&lm, &batch, |_stage, _grads| Ok(()))?;
//! opt.step(lm.params().vars(), &grads)?;
//! # let _ = loss; Ok(()) }
//! ```
//!
//! Layout: [`config`] (sizes, parameter counts), [`params`] (named parameters, seeded
//! init), [`layers`] (differentiable building blocks), [`lm`] (the Transformer LM),
//! [`kernels`] (fused ops with backward), [`rmsnorm`], [`toy`] (the ToyModel), [`staged`] (the
//! stage seam DDP uses), [`adamw`], [`shadow`] (bf16 weight copies AdamW writes), [`gemm_sms`] (how many SMs cuBLAS plans GEMMs for), [`tf32`] (TF32
//! for fp32 GEMMs, opt in).

pub mod adamw;
mod block;
pub mod config;
pub mod error;
#[cfg(feature = "cuda")]
pub mod fused_adamw;
pub mod gemm_sms;
pub mod graph;
pub mod kernels;
pub mod layers;
pub mod lm;
pub mod params;
pub mod profile;
pub mod rmsnorm;
pub mod shadow;
pub mod staged;
pub mod tf32;
pub mod toy;

pub use adamw::{AdamW, AdamWConfig};
pub use config::{LmConfig, CONTEXT, SIZES, VOCAB};
pub use error::{ModelError, Result};
pub use lm::TransformerLm;
pub use params::ParamSet;
pub use staged::{
    forward, forward_backward, forward_with, Batch, Grads, SavedStage, StagedModel, Tape,
};
pub use toy::ToyModel;

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
//! let batch = Batch::new(input, targets);
//! let mut opt = AdamW::new(AdamWConfig::default())?;
//! // Staged backward: the callback sees each stage's gradients as soon as they are final.
//! let (loss, grads) = forward_backward(&lm, &batch, |_stage, _grads| Ok(()))?;
//! opt.step(lm.params().vars(), &grads)?;
//! # let _ = loss; Ok(()) }
//! ```
//!
//! Layout: [`config`] (sizes, parameter counts), [`plan`] (the per-GPU memory plan of each
//! data-parallel strategy, the `memplan` crate), [`budget`] (checks before allocating), [`params`] (named parameters, seeded
//! init), [`layers`] (differentiable building blocks), [`lm`] (the Transformer LM),
//! [`kernels`] (fused ops with backward), [`gemm`] (the block's GEMMs, cuBLASLt tuned on CUDA), [`rmsnorm`], [`toy`] (the ToyModel), [`staged`] (the
//! stage seam DDP uses), [`adamw`], [`gemm_sms`] (how many SMs cuBLAS plans GEMMs for), [`tf32`] (TF32
//! for fp32 GEMMs, opt in).

mod block;
pub mod budget;
pub mod config;
mod embedding;
pub mod gemm;

mod head;
pub mod kernels;
pub mod layers;
pub mod lm;
pub mod named;
pub mod rmsnorm;
pub mod tf32;
pub mod toy;

// The seam (stages, parameters, batches, gradients, AdamW) lives in the `seam` crate, which
// ddp and zero1 depend on without this crate; re-exported so `model::AdamW` etc. still work.
#[cfg(feature = "cuda")]
pub use seam::fused_adamw;
pub use seam::{adamw, error, gemm_sms, graph, in_backward, params, profile, shadow, staged};
pub use seam::{
    forward, forward_backward, forward_with, AdamW, AdamWConfig, Batch, Grads, InBackward,
    ModelError, ParamSet, Result, SavedStage, SideStream, StagedModel, Tape,
};

pub use config::{LmConfig, CONTEXT, SIZES, VOCAB};
pub use lm::TransformerLm;
/// The memory plan per strategy and the sizes table (the `memplan` crate, which xtask
/// reads without building candle).
pub use memplan as plan;
pub use toy::ToyModel;

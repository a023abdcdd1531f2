//! The seam between a model and data-parallel training. `ddp` and `zero1` train any model
//! that implements [`StagedModel`] and depend on this crate (and `comm`), not on the
//! project's LM (the `model` crate implements the seam for it and for ToyModel).
//!
//! Layout: [`staged`] (the stage trait, the staged forward/backward, [`Grads`]), [`batch`]
//! ([`Batch`]: input, targets and named tensors),
//! [`params`] (named parameters, seeded init; from a candle-nn `VarMap` or existing `Var`s:
//! [`ParamSet::from_varmap`], [`ParamSet::from_vars`]), [`sequential`] (a staged model of
//! candle-nn modules or closures, the loss a closure outside it), [`adamw`] (AdamW as torch.optim.AdamW; on
//! CUDA one fused kernel per parameter, `fused_adamw`), [`shadow`] (the bf16 weight copies
//! AdamW writes for a bf16 forward), [`span`] (AdamW on part of a parameter, in place: ZeRO-1's shards), [`in_backward`] (AdamW stage by stage inside the
//! backward, optionally on a second CUDA stream), [`accum`] (gradient accumulation in place), [`staged_norm`] (the clipping norm summed
//! stage by stage inside the backward), [`gemm_sms`] (how many SMs cuBLAS
//! plans GEMMs for), [`device`] (the GPU's name), [`profile`] (named marks for profilers), [`error`].

pub mod accum;
pub mod adamw;
mod adopt;
pub mod batch;
pub mod capture;
pub mod clip;
pub mod device;
pub mod error;
#[cfg(feature = "cuda")]
pub mod fused_adamw;
pub mod gemm_sms;
pub mod graph;
pub mod in_backward;
pub mod memory;
pub mod params;
#[cfg(feature = "cuda")]
pub mod pinned;
pub mod profile;
pub mod sequential;
pub mod shadow;
pub mod span;
pub mod staged;
pub mod staged_norm;
mod update;

pub use adamw::{AdamW, AdamWConfig, Moment};
pub use error::{ModelError, Result};
pub use in_backward::{InBackward, SideStream};
pub use params::ParamSet;
pub use sequential::{Sequential, SequentialBuilder};
pub use span::Span;
pub use staged::{
    forward, forward_backward, forward_backward_into, forward_with, Batch, Grads, SavedStage,
    StagedModel, Tape,
};
pub use staged_norm::StagedNorm;

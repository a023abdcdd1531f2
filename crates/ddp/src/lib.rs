//! Data-parallel training over `comm`, on `model`'s staged backward.
//!
//! How to use (one process or thread per rank):
//! ```no_run
//! # fn main() -> ddp::Result<()> {
//! use std::sync::Arc;
//! use ddp::{Ddp, DdpOptions, Strategy, shard_batch};
//! use model::{AdamW, AdamWConfig, StagedModel, ToyModel, Batch};
//! let comm = Arc::new(comm::cpu_group(1, Default::default())?.remove(0));
//! let dev = candle_core::Device::Cpu;
//! let m = ToyModel::new(6, 4, 0, &dev)?;
//! // Checks every rank has the same model and options, broadcasts rank 0's weights.
//! let mut ddp = Ddp::new(comm.clone(), &m, DdpOptions::new(Strategy::Bucketed { bucket_mb: 25.0 }))?;
//! let mut opt = AdamW::new(AdamWConfig::default())?;
//! # let global = Batch { input: candle_core::Tensor::zeros((4, 6), candle_core::DType::F32, &dev)?,
//! #     targets: candle_core::Tensor::zeros(4, candle_core::DType::U32, &dev)? };
//! let local = shard_batch(&global, 0, 1)?;
//! let _loss = ddp.forward_backward(&m, &local)?;          // launches all-reduces during backward
//! let grads = ddp.finish_gradient_synchronization()?;     // averaged gradients
//! opt.step(m.params().vars(), &grads)?;
//! # Ok(()) }
//! ```
//!
//! Layout: [`strategy`] (the four strategies), [`check`] (what the correctness checks
//! share), [`buckets`] (which gradients travel
//! together), [`consistency`] (same model everywhere, initial broadcast), [`reducer`]
//! (`Ddp`), `launch` (a bucket's buffer and its collective, coalesced or not), [`shard`] (splitting a global batch).

pub mod buckets;
pub mod check;
pub mod consistency;
pub mod error;
mod launch;
pub mod reducer;
pub mod shard;
pub mod strategy;

pub use error::{DdpError, Result};
pub use reducer::{Ddp, DdpOptions, SyncStats};
pub use shard::shard_batch;
pub use strategy::Strategy;

//! Data-parallel training over `comm`, on the `seam` crate's staged backward (any
//! model that implements `seam::StagedModel`; the project's LM is one, in `model`).
//!
//! How to use (one process or thread per rank; any model implementing the seam's
//! [`seam::StagedModel`]):
//! ```no_run
//! use std::sync::Arc;
//! use ddp::{Ddp, DdpOptions, Strategy, shard_batch};
//! use seam::{AdamW, AdamWConfig, Batch, StagedModel};
//! fn train(m: &dyn StagedModel, global: &Batch) -> ddp::Result<()> {
//!     let comm = Arc::new(comm::cpu_group(1, Default::default())?.remove(0));
//!     // Checks every rank has the same model and options, broadcasts rank 0's weights.
//!     let mut ddp = Ddp::new(comm.clone(), m, DdpOptions::new(Strategy::Bucketed { bucket_mb: 25.0 }))?;
//!     let mut opt = AdamW::new(AdamWConfig::default())?;
//!     let local = shard_batch(global, 0, 1)?;
//!     let _loss = ddp.forward_backward(m, &local)?;          // launches all-reduces during backward
//!     let grads = ddp.finish_gradient_synchronization()?;    // averaged gradients
//!     opt.step(m.params().vars(), &grads)?;
//!     Ok(())
//! }
//! ```
//!
//! Layout: [`strategy`] (the four strategies), [`checkpoint`] (`Ddp::save` / `Ddp::resume`:
//! parameters and AdamW state), [`check`] (what the correctness checks
//! share), [`buckets`] (which gradients travel
//! together), [`consistency`] (same model everywhere, initial broadcast), [`options`]
//! (`DdpOptions`), [`reducer`] (`Ddp`), `no_sync` (micro-batches summed locally), `rows` (the embedding's
//! gradient from every rank's rows), `launch` (a bucket's buffer and its collective, coalesced or not), [`split`] (the all-reduce as a
//! reduce-scatter in the backward and an all-gather, in the backward or beside AdamW), [`shard`] (splitting a global
//! batch).

pub mod buckets;
pub mod check;
pub mod checkpoint;
pub mod consistency;
pub mod error;
mod launch;
mod no_sync;
pub mod options;
pub mod plugin;
pub mod reducer;
mod rows;
mod scatter;
pub mod shard;
pub mod split;
mod squares;
pub mod strategy;
pub mod tail;

pub use error::{DdpError, Result};
pub use reducer::{BucketShard, Ddp, DdpOptions, SyncStats};
pub use shard::shard_batch;
pub use strategy::Strategy;

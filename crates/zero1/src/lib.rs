//! Optimizer-state sharding (issue 5).
//!
//! [`ShardedOptimizer`] wraps the model crate's AdamW: parameters (in groups with their
//! own hyperparameters) are partitioned over ranks balanced by element count; each rank
//! keeps moments for its shard only, steps it, and the owners broadcast the updated
//! parameters. Use it after DDP has averaged the gradients:
//!
//! ```ignore
//! let mut opt = ShardedOptimizer::new(comm.clone(), vec![ParamGroup { params: vars.clone(), cfg }])?;
//! ddp.forward_backward(&model, &batch)?;
//! let grads = ddp.finish_gradient_synchronization()?;
//! opt.step(&vars, &grads)?;
//! ```
//!
//! [`Zero1`] is ZeRO stage 1 without DDP: it reduce-scatters the local gradients itself,
//! steps its chunk of the flat parameters, and all-gathers them:
//!
//! ```ignore
//! let mut z = Zero1::new(comm.clone(), &vars, cfg)?;
//! let (_, grads) = seam::forward_backward(&model, &local_batch, |_, _| Ok(()))?;
//! z.step(&grads)?;
//! ```
//!
//! `Zero1::save` / `Zero1::resume` write and read sharded safetensors checkpoints
//! ([`checkpoint`]); resuming works on another world size.
//!
//! [`Zero1Overlap`] is ZeRO stage 1 through ddp's buckets: each bucket is reduce-scattered
//! during backward as soon as its gradients are final (overlapping communication with
//! compute), the rank steps its slice of every bucket and all-gathers them:
//!
//! ```ignore
//! let mut z = Zero1Overlap::new(comm.clone(), &model, Strategy::Bucketed { bucket_mb: 25.0 }, cfg)?;
//! z.forward_backward(&model, &local_batch)?;
//! z.step()?;
//! ```
//!
//! `Zero1Overlap::save` / `resume` use the same checkpoint format (shards list the flat
//! runs they hold), so either optimizer resumes the other's checkpoint on any world size.
//! `ShardedOptimizer::save` / `resume` write one such checkpoint per parameter group.

pub mod checkpoint;
pub mod error;
mod fsdp;
mod gather;
mod masters;
pub mod overlap;
mod overlap_ckpt;
pub mod partition;
mod plugin;
pub mod sharded;
mod sharded_checkpoint;
mod sharded_step;
mod switches;
pub mod zero;

pub use error::{Result, Zero1Error};
pub use overlap::Zero1Overlap;
pub use sharded::{ParamGroup, ShardedOptimizer};
pub use sharded_step::Sharded;
pub use zero::Zero1;

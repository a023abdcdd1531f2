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
//! Still to come (issue 5): true ZeRO-1 (reduce-scatter of gradients, all-gather of
//! parameters), sharded checkpoints, GPU memory accounting.

pub mod error;
pub mod partition;
pub mod sharded;

pub use error::{Result, Zero1Error};
pub use sharded::{ParamGroup, ShardedOptimizer};

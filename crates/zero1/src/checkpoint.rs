//! Sharded checkpoints of [`crate::Zero1`], [`crate::Zero1Overlap`] and the sharded
//! optimizer: the format of `step::format::sharded` (the parameters, and each rank's shard
//! of the moments indexed by flat element position, so any shard layout and world size
//! resumes any other).

pub use step::format::sharded::*;

//! Checkpoints of DDP training: the parameters and the AdamW state, in the replicated
//! format (`step::format::flat`: rank 0 writes one file, `ddp.safetensors`; every rank
//! reads and checks it, and the ranks agree before any parameter is touched). Resuming
//! then training equals training straight through, bit for bit.
//!
//! ```ignore
//! ddp.save(dir, &model, &opt)?;                       // collective
//! let step = ddp.resume(dir, &model, &mut opt)?;      // collective; returns the step count
//! ```

pub use step::format::flat::*;

use crate::error::Result;
use crate::reducer::Ddp;
use seam::{AdamW, StagedModel};
use std::path::Path;

impl Ddp {
    /// Saves `model`'s parameters and `opt`'s state into `dir` as the checkpoint of step
    /// `opt.steps_taken()` ([`save`]). Every rank calls it; rank 0 writes.
    pub fn save(&self, dir: &Path, model: &dyn StagedModel, opt: &AdamW) -> Result<()> {
        Ok(save(self.comm(), dir, model, opt)?)
    }

    /// Loads the checkpoint in `dir` into `model`'s parameters and `opt` ([`resume`]);
    /// returns the step count. Every rank calls it.
    pub fn resume(&mut self, dir: &Path, model: &dyn StagedModel, opt: &mut AdamW) -> Result<u64> {
        Ok(resume(self.comm(), dir, model, opt)?)
    }
}

//! Checkpoints of a training step: the parameters and the optimizer state, in the format
//! of the step's synchronisation (`ddp::checkpoint`'s one file for one rank and DDP; the
//! sharded format in `group-0/` for ZeRO-1 and the sharded optimizer, either of which
//! resumes the other's). Collective: every rank calls them.

use crate::strategy::Ckpt;
use crate::TrainStep;
use anyhow::Result;
use comm::Communicator;
use seam::StagedModel;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where the sharded format keeps its manifest inside a step directory.
pub const GROUP: &str = "group-0";

impl TrainStep {
    /// The directory holding the checkpoint's manifest inside step directory `dir`.
    pub fn manifest_dir(&self, dir: &Path) -> PathBuf {
        self.core.strategy.manifest_dir(dir)
    }

    /// Saves `model`'s parameters and the optimizer state of the steps taken into `dir`.
    /// `comm`: the ranks' communicator (a one-rank step has none of its own).
    pub fn save(
        &mut self,
        model: &dyn StagedModel,
        dir: &Path,
        comm: &Arc<dyn Communicator>,
    ) -> Result<()> {
        let (strategy, opt) = self.core.strategy_and_adamw_mut();
        strategy.save(Ckpt {
            model,
            dir,
            comm,
            opt,
        })
    }

    /// Loads the checkpoint in step directory `dir` into `model` and the optimizer; returns
    /// its step count. Either format resumes any strategy (another strategy, another
    /// world size), except the sharded optimizer, which reads sharded checkpoints only. A
    /// graph captured before is dropped (it would replay the old optimizer's buffers): the
    /// next step runs eager and captures again.
    pub fn resume(
        &mut self,
        model: &dyn StagedModel,
        dir: &Path,
        comm: &Arc<dyn Communicator>,
    ) -> Result<u64> {
        self.flush()?;
        self.recapture();
        // The masters are rewritten: no bf16 copy written before (fresh, or held by a
        // ZeRO-1 step that gathered copies) stands for them any more.
        model.params().bf16_shadows().invalidate();
        let (strategy, opt) = self.core.strategy_and_adamw_mut();
        strategy.resume(Ckpt {
            model,
            dir,
            comm,
            opt,
        })
    }
}

/// A replicated optimizer's resume (one rank, DDP; `comm` its ranks'): its own format's
/// file, or a sharded checkpoint read whole.
pub fn resume_replicated(comm: &dyn Communicator, c: Ckpt<'_>) -> Result<u64> {
    let group = c.dir.join(GROUP);
    match group.is_dir() {
        true => replicated_from_sharded(comm, &group, c.model, c.opt),
        false => Ok(crate::format::flat::resume(comm, c.dir, c.model, c.opt)?),
    }
}

/// A replicated optimizer (one rank, DDP) from a sharded checkpoint (`group`): every rank
/// reads the whole of it (parameters, and the moments gathered from every shard), the
/// ranks agree, then the parameters and each one's moments are set.
fn replicated_from_sharded(
    comm: &dyn Communicator,
    group: &Path,
    model: &dyn StagedModel,
    opt: &mut seam::AdamW,
) -> Result<u64> {
    let params = model.params().vars().to_vec();
    let device = params
        .first()
        .ok_or_else(|| anyhow::anyhow!("the model has no parameters"))?
        .device()
        .clone();
    let numel = params.iter().map(|p| p.elem_count()).sum();
    let read = crate::format::sharded::read_all(group, &params, &[(0, numel)]);
    let (w, st) = checkpoint::agree_on_read(comm, &device, group, read)?;
    checkpoint::agree_on_read(comm, &device, group, w.set(&params))?;
    let mut off = 0;
    for (i, v) in params.iter().enumerate() {
        let n = v.elem_count();
        let (m, s) = st.moments(off, n)?;
        opt.restore(st.step, i, v, &m, &s)?;
        off += n;
    }
    opt.set_steps_taken(st.step);
    Ok(st.step)
}

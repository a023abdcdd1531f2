//! Checkpoints of a training step: the parameters and the optimizer state, in the format
//! of the step's synchronisation (`ddp::checkpoint`'s one file for one rank and DDP; the
//! sharded format in `group-0/` for ZeRO-1 and the sharded optimizer, either of which
//! resumes the other's). Collective: every rank calls them.

use crate::core::Sync;
use crate::TrainStep;
use anyhow::Result;
use comm::Communicator;
use seam::StagedModel;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use zero1::{ParamGroup, ShardedOptimizer, Zero1Overlap};

/// Where the sharded formats keep their manifest inside a step directory.
const GROUP: &str = "group-0";

impl TrainStep {
    /// The directory holding the checkpoint's manifest inside step directory `dir`.
    pub fn manifest_dir(&self, dir: &Path) -> PathBuf {
        match self.core.sync {
            Sync::Sharded(..) | Sync::Zero1(_) => dir.join(GROUP),
            Sync::Local | Sync::Ddp(_) => dir.to_path_buf(),
        }
    }

    /// Saves `model`'s parameters and the optimizer state of the steps taken into `dir`.
    /// `comm`: the ranks' communicator (a one-rank step has none of its own).
    pub fn save(
        &mut self,
        model: &dyn StagedModel,
        dir: &Path,
        comm: &Arc<dyn Communicator>,
    ) -> Result<()> {
        let (sync, opt) = self.core.sync_and_adamw_mut();
        match sync {
            Sync::Local => ddp::checkpoint::save(comm.as_ref(), dir, model, opt)?,
            Sync::Ddp(d) => ddp::checkpoint::save(d.comm(), dir, model, opt)?,
            Sync::Sharded(_, o) => o.save(dir)?,
            Sync::Zero1(z) => z.save(&dir.join(GROUP))?,
        }
        Ok(())
    }

    /// Loads the checkpoint in step directory `dir` into `model` and the optimizer; returns
    /// its step count. A graph captured before is dropped (it would replay the old
    /// optimizer's buffers): the next step runs eager and captures again.
    pub fn resume(
        &mut self,
        model: &dyn StagedModel,
        dir: &Path,
        comm: &Arc<dyn Communicator>,
    ) -> Result<u64> {
        self.flush()?;
        self.recapture();
        let (sync, opt) = self.core.sync_and_adamw_mut();
        Ok(match sync {
            Sync::Local => ddp::checkpoint::resume(comm.as_ref(), dir, model, opt)?,
            Sync::Ddp(d) => ddp::checkpoint::resume(d.comm(), dir, model, opt)?,
            Sync::Sharded(_, o) => {
                let g = ParamGroup {
                    params: model.params().vars().to_vec(),
                    cfg: opt.cfg,
                };
                **o = ShardedOptimizer::resume(comm.clone(), vec![g], dir)?;
                checkpoint::Checkpoint::open(&dir.join(GROUP))?.step()
            }
            Sync::Zero1(z) => {
                let (s, cfg, ahead) = (
                    z.ddp().options().strategy,
                    z.optimizer().cfg,
                    z.gather_ahead(),
                );
                let mut r = Zero1Overlap::resume(comm.clone(), model, s, cfg, &dir.join(GROUP))?;
                r.set_gather_ahead(ahead);
                **z = r;
                z.optimizer().steps_taken()
            }
        })
    }
}

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
    /// its step count. Either format resumes any synchronisation (another strategy, another
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
        let group = dir.join(GROUP);
        let sharded = group.is_dir();
        // The masters are rewritten: no bf16 copy written before (fresh, or held by a
        // ZeRO-1 step that gathered copies) stands for them any more.
        model.params().bf16_shadows().invalidate();
        let (sync, opt) = self.core.sync_and_adamw_mut();
        Ok(match (sync, sharded) {
            (Sync::Local, false) => ddp::checkpoint::resume(comm.as_ref(), dir, model, opt)?,
            (Sync::Ddp(d), false) => ddp::checkpoint::resume(d.comm(), dir, model, opt)?,
            (Sync::Local, true) => replicated_from_sharded(comm.as_ref(), &group, model, opt)?,
            (Sync::Ddp(d), true) => replicated_from_sharded(d.comm(), &group, model, opt)?,
            (Sync::Sharded(_, o), true) => {
                let g = ParamGroup {
                    params: model.params().vars().to_vec(),
                    cfg: opt.cfg,
                };
                **o = ShardedOptimizer::resume(comm.clone(), vec![g], dir)?;
                checkpoint::Checkpoint::open(&group)?.step()
            }
            (Sync::Sharded(..), false) => anyhow::bail!(
                "checkpoint {}: the sharded optimizer resumes sharded checkpoints only (of zero1 or sharded); this one is replicated (single or a ddp strategy): resume it with --strategy zero1",
                dir.display()
            ),
            (Sync::Zero1(z), _) => {
                let (s, cfg, ahead) = (z.ddp().options(), z.optimizer().cfg, z.gather_ahead());
                let mut r = if sharded {
                    Zero1Overlap::resume(comm.clone(), model, s, cfg, &group)?
                } else {
                    let f = ddp::checkpoint::read_flat(comm.as_ref(), dir, model)?;
                    let state = zero1::checkpoint::Consolidated {
                        step: f.step,
                        exp_avg: f.exp_avg,
                        exp_avg_sq: f.exp_avg_sq,
                    };
                    Zero1Overlap::resume_from(comm.clone(), model, s, cfg, &f.params, &state)?
                };
                r.set_gather_ahead(ahead);
                **z = r;
                z.optimizer().steps_taken()
            }
        })
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
    let read = zero1::checkpoint::read_all(group, &params).map_err(anyhow::Error::from);
    let (w, st) = checkpoint::agree_on_read(comm, &device, group, read)?;
    zero1::checkpoint::set_params(&params, &w)?;
    let mut off = 0;
    for (i, v) in params.iter().enumerate() {
        let n = v.elem_count();
        let (m, s) = (&st.exp_avg[off..off + n], &st.exp_avg_sq[off..off + n]);
        opt.restore(st.step, i, v, m, s)?;
        off += n;
    }
    opt.set_steps_taken(st.step);
    Ok(st.step)
}

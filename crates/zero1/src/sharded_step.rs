//! DDP plus `zero1`'s sharded optimizer: the gradients all-reduced, each rank's AdamW on
//! the parameters it owns, the owners broadcasting them. Eager only.

use crate::{ParamGroup, ShardedOptimizer};
use anyhow::Result;
use candle_core::Tensor;
use comm::Communicator;
use ddp::plugin::observed;
use ddp::Ddp;
use std::path::{Path, PathBuf};
use step::strategy::{norm_and_coef, Backward, Ckpt, Pass, Strategy, Update, GROUP};
use step::StepOptions;

/// DDP plus the sharded optimizer (AdamW state split over the ranks).
pub struct Sharded {
    ddp: Ddp,
    opt: ShardedOptimizer,
}

impl Sharded {
    pub fn new(ddp: Ddp, opt: ShardedOptimizer) -> Self {
        Self { ddp, opt }
    }
    pub fn ddp(&self) -> &Ddp {
        &self.ddp
    }
    pub fn ddp_mut(&mut self) -> &mut Ddp {
        &mut self.ddp
    }
    pub fn optimizer(&self) -> &ShardedOptimizer {
        &self.opt
    }
}

impl Strategy for Sharded {
    fn comm(&self) -> Option<&dyn Communicator> {
        Some(self.ddp.comm())
    }

    fn check(&self, o: &StepOptions) -> Result<()> {
        if o.skip_nonfinite {
            anyhow::bail!(
                "skipping non-finite steps: not with the sharded optimizer (its owners' updates \
                 are broadcast); use ZeRO-1 (zero1::Zero1Overlap)"
            );
        }
        Ok(())
    }

    fn uncapturable(&self) -> Option<String> {
        Some(
            "the sharded optimizer's AdamW scalars are not uploaded per replay: eager steps".into(),
        )
    }

    fn set_lr(&mut self, lr: f64) {
        self.opt.set_lr(lr);
    }

    fn forward_backward(&mut self, p: Pass<'_>) -> Result<Backward> {
        observed(&mut self.ddp, p)
    }

    fn update(&mut self, u: Update<'_>) -> Result<Option<Tensor>> {
        let Some(g) = u.grads else {
            return Ok(None);
        };
        let vars = u.model.params().vars();
        let Some(clip) = u.clip else {
            self.opt.step(vars, &g)?;
            return Ok(None);
        };
        let nc = norm_and_coef(u.staged, &g, clip)?;
        self.opt.step(vars, &seam::clip::scale(&g, &nc)?)?;
        Ok(Some(nc))
    }

    fn state_elements(&self, _params: usize) -> usize {
        self.opt.owned_elements()
    }

    fn manifest_dir(&self, dir: &Path) -> PathBuf {
        dir.join(GROUP)
    }

    fn save(&mut self, c: Ckpt<'_>) -> Result<()> {
        Ok(self.opt.save(c.dir)?)
    }

    fn resume(&mut self, c: Ckpt<'_>) -> Result<u64> {
        let group = c.dir.join(GROUP);
        if !group.is_dir() {
            anyhow::bail!(
                "checkpoint {}: the sharded optimizer resumes sharded checkpoints only (of zero1 or sharded); this one is replicated (single or a ddp strategy): resume it with --strategy zero1",
                c.dir.display()
            );
        }
        let g = ParamGroup {
            params: c.model.params().vars().to_vec(),
            cfg: c.opt.cfg,
        };
        self.opt = ShardedOptimizer::resume(c.comm.clone(), vec![g], c.dir)?;
        Ok(::checkpoint::Checkpoint::open(&group)?.step())
    }
}

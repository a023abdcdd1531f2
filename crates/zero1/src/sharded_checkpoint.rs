//! Checkpoints of [`ShardedOptimizer`]: one directory per parameter group
//! (`group-{g}/`, each in the [`crate::checkpoint`] format: the group's parameters, and per
//! rank the moments of the parameters it owns as flat runs), because groups keep their own
//! step counts (a group added mid-training starts at step 0). Resuming re-partitions the
//! groups over the new world size and takes each owned parameter's moments from the
//! consolidated group state.

use crate::checkpoint::{self, Signature};
use crate::error::{Result, Zero1Error};
use crate::sharded::{ParamGroup, ShardedOptimizer};
use crate::zero::agree_on;
use candle_core::Var;
use comm::Communicator;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn group_dir(dir: &Path, g: usize) -> PathBuf {
    dir.join(format!("group-{g}"))
}

/// Flat offset of every parameter of a group (declaration order).
fn offsets(params: &[Var]) -> Vec<usize> {
    params
        .iter()
        .scan(0, |o, p| {
            let at = *o;
            *o += p.elem_count();
            Some(at)
        })
        .collect()
}

impl ShardedOptimizer {
    /// Writes `dir/group-{g}/` for every group; every rank must call it.
    pub fn save(&self, dir: &Path) -> Result<()> {
        let (w, r) = (self.comm.world_size(), self.comm.rank());
        let written = (|| -> Result<()> {
            for (gi, g) in self.groups.iter().enumerate() {
                let gd = group_dir(dir, gi);
                checkpoint::create_dir(&gd)?;
                let sig = Signature::of(&checkpoint::shapes(&g.params));
                let step = g.opt.steps_taken();
                let off = offsets(&g.params);
                let (mut runs, mut m, mut v) = (Vec::new(), Vec::new(), Vec::new());
                for (k, &i) in g.mine.iter().enumerate() {
                    let p = &g.params[i];
                    let n = p.elem_count();
                    let (mk, vk) = g
                        .opt
                        .moments(k, p)?
                        .unwrap_or_else(|| (vec![0.0; n], vec![0.0; n]));
                    runs.push((off[i], n));
                    m.extend(mk);
                    v.extend(vk);
                }
                checkpoint::write_shard(&gd, w, r, step, sig, &runs, m, v)?;
                if r == 0 {
                    checkpoint::write_params(&gd, &g.params, w, step, sig)?;
                }
            }
            Ok(())
        })();
        let dev = self.groups.first().map(|g| g.params[0].device().clone());
        match dev {
            Some(d) => agree_on(self.comm.as_ref(), &d, "save", written),
            None => Err(Zero1Error::Input(
                "save: the optimizer has no groups".into(),
            )),
        }
    }

    /// Loads `dir` (written by [`Self::save`] on any world size, or consolidated per
    /// group) into the groups' parameters and a new optimizer over `groups` (the same
    /// groups, in the same order, with their hyperparameters). Every file is validated
    /// before the model is touched; a failure on any rank fails all.
    pub fn resume(
        comm: Arc<dyn Communicator>,
        groups: Vec<ParamGroup>,
        dir: &Path,
    ) -> Result<Self> {
        let dev = groups
            .first()
            .and_then(|g| g.params.first())
            .ok_or_else(|| Zero1Error::Input("resume: no parameter groups".into()))?
            .device()
            .clone();
        let read = (|| -> Result<Vec<_>> {
            if group_dir(dir, groups.len()).exists() {
                return Err(Zero1Error::Input(format!(
                    "checkpoint {}: has more than the {} groups passed",
                    dir.display(),
                    groups.len()
                )));
            }
            groups
                .iter()
                .enumerate()
                .map(|(gi, g)| checkpoint::read_all(&group_dir(dir, gi), &g.params))
                .collect()
        })();
        let loaded = agree_on(comm.as_ref(), &dev, "resume", read)?;
        for (g, (ps, _)) in groups.iter().zip(&loaded) {
            checkpoint::set_params(&g.params, ps)?;
        }
        let mut s = Self::new(comm, groups)?;
        for (g, (_, state)) in s.groups.iter_mut().zip(&loaded) {
            let off = offsets(&g.params);
            g.opt.set_steps_taken(state.step);
            for (k, &i) in g.mine.iter().enumerate() {
                let (p, n) = (&g.params[i], g.params[i].elem_count());
                let (a, b) = (off[i], off[i] + n);
                g.opt.restore(
                    state.step,
                    k,
                    p,
                    &state.exp_avg[a..b],
                    &state.exp_avg_sq[a..b],
                )?;
            }
        }
        Ok(s)
    }
}

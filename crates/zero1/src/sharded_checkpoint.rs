//! Checkpoints of [`ShardedOptimizer`]: one directory per parameter group
//! (`group-{g}/`, each a checkpoint in the [`crate::checkpoint`] format with its own
//! manifest: the group's parameters, and per rank the moments of the parameters it owns as
//! flat runs), because groups keep their own step counts (a group added mid-training
//! starts at step 0). Saving removes every group's manifest before writing any group. Resuming re-partitions the
//! groups over the new world size and takes each owned parameter's moments from the
//! consolidated group state.

use crate::checkpoint;
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
    step::format::flat_offsets(params.iter().map(|p| p.elem_count()))
}

impl ShardedOptimizer {
    /// Writes `dir/group-{g}/` for every group (one checkpoint each, see
    /// [`checkpoint::save`]); every rank must call it. Every group's old manifest is
    /// removed first, so a crash mid-save cannot leave new groups beside old ones.
    pub fn save(&self, dir: &Path) -> Result<()> {
        let dev = match self.groups.first() {
            Some(g) => g.params[0].device().clone(),
            None => {
                return Err(Zero1Error::Input(
                    "save: the optimizer has no groups".into(),
                ))
            }
        };
        for gi in 0..self.groups.len() {
            ::checkpoint::invalidate(self.comm.as_ref(), &dev, &group_dir(dir, gi))?;
        }
        for (gi, g) in self.groups.iter().enumerate() {
            let off = offsets(&g.params);
            checkpoint::save(
                self.comm.as_ref(),
                &group_dir(dir, gi),
                &g.params,
                g.opt.steps_taken(),
                || {
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
                    Ok::<_, Zero1Error>(checkpoint::Moments::from_vecs(runs, m, v)?)
                },
            )?;
        }
        Ok(())
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
        // Built first (it partitions the groups, touching no parameter), so that each rank
        // reads only the moments of the parameters it owns.
        let mut s = Self::new(comm, groups)?;
        let offs: Vec<Vec<usize>> = s.groups.iter().map(|g| offsets(&g.params)).collect();
        let read = (|| -> Result<Vec<_>> {
            if group_dir(dir, s.groups.len()).exists() {
                return Err(Zero1Error::Input(format!(
                    "checkpoint {}: has more than the {} groups passed",
                    dir.display(),
                    s.groups.len()
                )));
            }
            s.groups
                .iter()
                .zip(&offs)
                .enumerate()
                .map(|(gi, (g, off))| {
                    let want: Vec<(usize, usize)> = (g.mine.iter())
                        .map(|&i| (off[i], g.params[i].elem_count()))
                        .collect();
                    Ok(checkpoint::read_all(&group_dir(dir, gi), &g.params, &want)?)
                })
                .collect()
        })();
        let loaded = agree_on(s.comm.as_ref(), &dev, "resume", read)?;
        let set = (s.groups.iter().zip(&loaded))
            .try_for_each(|(g, (ps, _))| ps.set(&g.params))
            .map_err(Zero1Error::from);
        agree_on(s.comm.as_ref(), &dev, "resume", set)?;
        for ((g, (_, state)), off) in s.groups.iter_mut().zip(&loaded).zip(&offs) {
            g.opt.set_steps_taken(state.step);
            for (k, &i) in g.mine.iter().enumerate() {
                let (p, n) = (&g.params[i], g.params[i].elem_count());
                let (m, v) = state.moments(off[i], n)?;
                g.opt.restore(state.step, k, p, &m, &v)?;
            }
        }
        Ok(s)
    }
}

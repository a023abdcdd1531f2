//! Checkpoints of DDP training: the parameters and the AdamW state (both moments of every
//! parameter, the step count), in the format of the `checkpoint` crate (each file fsynced,
//! the ranks agree, `manifest.json` written last with sizes and CRC-32s; zero1 uses the
//! same). DDP's replicas are identical, so rank 0 writes the one file, `ddp.safetensors`:
//! `param/{name}`, `exp_avg/{name}`, `exp_avg_sq/{name}` and `meta` ([version, steps]).
//! Every rank reads it on resume, checks it against its model (names and shapes, naming
//! what differs) and the ranks agree before any parameter is touched, so a bad checkpoint
//! fails on every rank and changes nothing. Resuming then training equals training
//! straight through, bit for bit. A sharded optimizer resuming it ([`read_flat`]) reads
//! the parameters and only the moments of the elements it keeps.
//!
//! ```ignore
//! step::format::flat::save(comm, dir, &model, &opt)?;              // collective
//! let step = step::format::flat::resume(comm, dir, &model, &mut opt)?; // its step count
//! ```

use super::state::{wanted, within, Consolidated};
use ::checkpoint::error::{bad, CheckpointError, Result};
use ::checkpoint::Part;
use candle_core::{DType, Device, Tensor};
use seam::{AdamW, StagedModel};
use std::collections::HashMap;
use std::path::Path;

/// The file rank 0 writes.
pub const FILE: &str = "ddp.safetensors";
const VERSION: f64 = 1.0;

/// Saves `model`'s parameters and `opt`'s state into `dir` as the checkpoint of step
/// `opt.steps_taken()`. Every rank calls it; rank 0 writes. A parameter that has not been
/// stepped yet is saved without moments.
pub fn save(
    comm: &dyn comm::Communicator,
    dir: &Path,
    model: &dyn StagedModel,
    opt: &AdamW,
) -> Result<()> {
    let device = model_device(dir, model)?;
    let step = opt.steps_taken();
    ::checkpoint::save(comm, &device, dir, step, |files| {
        if files.rank() != 0 {
            return Ok(());
        }
        let p = model.params();
        let mut t = HashMap::new();
        for (i, (name, v)) in p.names().iter().zip(p.vars()).enumerate() {
            t.insert(format!("param/{name}"), v.as_tensor().clone());
            if let Some((m, s)) = opt.moments(i, v).map_err(|e| bad(dir, e))? {
                t.insert(format!("exp_avg/{name}"), Tensor::new(m, &Device::Cpu)?);
                t.insert(format!("exp_avg_sq/{name}"), Tensor::new(s, &Device::Cpu)?);
            }
        }
        t.insert(
            "meta".into(),
            Tensor::new(&[VERSION, step as f64], &Device::Cpu)?,
        );
        files.put(FILE, &t)?;
        Ok::<(), CheckpointError>(())
    })?;
    Ok(())
}

/// Loads the checkpoint in `dir` into `model`'s parameters and `opt` (moments and step
/// count); returns the step count. Every rank calls it. A missing or corrupt file, a
/// parameter missing or of another shape, or an extra one is an error naming it, on every
/// rank, before anything is changed.
pub fn resume(
    comm: &dyn comm::Communicator,
    dir: &Path,
    model: &dyn StagedModel,
    opt: &mut AdamW,
) -> Result<u64> {
    let read = read(dir, model, None);
    let (step, t) = ::checkpoint::agree_on_read(comm, &model_device(dir, model)?, dir, read)?;
    let p = model.params();
    for (i, (name, v)) in p.names().iter().zip(p.vars()).enumerate() {
        let w = &t[&format!("param/{name}")];
        v.set(&w.to_device(v.device())?.to_dtype(v.dtype())?)?;
        let moments = (
            t.get(&format!("exp_avg/{name}")),
            t.get(&format!("exp_avg_sq/{name}")),
        );
        if let (Some(m), Some(s)) = moments {
            let (m, s): (Vec<f32>, Vec<f32>) = (m.to_vec1()?, s.to_vec1()?);
            opt.restore(step, i, v, &m, &s).map_err(|e| bad(dir, e))?;
        }
    }
    opt.set_steps_taken(step);
    Ok(step)
}

/// Reads and checks the checkpoint against `model`: its step and the tensors kept: the
/// parameters and both moments of each, or with `held` ((start, len) runs of the flat
/// elements, as [`wanted`] sorts and checks them) only the moments' elements in those runs.
fn read(
    dir: &Path,
    model: &dyn StagedModel,
    held: Option<&[(usize, usize)]>,
) -> Result<(u64, HashMap<String, Tensor>)> {
    let ck = ::checkpoint::Checkpoint::open(dir)?;
    let p = model.params();
    let off = super::flat_offsets(p.vars().iter().map(|v| v.elem_count()));
    let at: HashMap<&str, (usize, usize)> =
        (p.names().iter().enumerate()) // name → (flat offset, elements)
            .map(|(i, name)| (name.as_str(), (off[i], off[i + 1] - off[i])))
            .collect();
    let mut counts = HashMap::new(); // every tensor's elements in the file
    let t = ck.load_parts(FILE, |k, shape, _| {
        let count: usize = shape.iter().product();
        counts.insert(k.to_string(), count);
        let param = k.strip_prefix("exp_avg/").or(k.strip_prefix("exp_avg_sq/"));
        match (held, param.and_then(|n| at.get(n))) {
            (Some(h), Some(&(off, n))) if count == n => Part::Elements(
                (within(h, off, off + n).into_iter())
                    .map(|(a, b)| a - off..b - off)
                    .collect(),
            ),
            (Some(_), Some(_)) => Part::Skip, // of another size: refused below
            _ => Part::Whole,
        }
    })?;
    let file = dir.join(FILE);
    let bad = |msg: String| bad(&file, msg);
    let meta: Vec<f64> = t
        .get("meta")
        .ok_or_else(|| bad("no tensor \"meta\" (not a DDP checkpoint)".into()))?
        .to_dtype(DType::F64)?
        .to_vec1()?;
    if meta.len() != 2 || meta[0] != VERSION || meta[1] as u64 != ck.step() {
        return Err(bad(format!(
            "unknown format or another step: meta {meta:?}, manifest step {}",
            ck.step()
        )));
    }
    let mut expected = 1; // meta
    for (name, v) in p.names().iter().zip(p.vars()) {
        let w = t
            .get(&format!("param/{name}"))
            .ok_or_else(|| bad(format!("no parameter {name}")))?;
        if w.dims() != v.dims() {
            return Err(bad(format!(
                "parameter {name} has shape {:?}, the model's {:?}",
                w.dims(),
                v.dims()
            )));
        }
        expected += 1;
        let m = counts.get(&format!("exp_avg/{name}"));
        let s = counts.get(&format!("exp_avg_sq/{name}"));
        match (m, s) {
            (None, None) => {}
            (Some(&m), Some(&s)) if m == v.elem_count() && s == v.elem_count() => expected += 2,
            _ => {
                return Err(bad(format!(
                    "the moments of parameter {name} are incomplete or of another size"
                )))
            }
        }
    }
    if counts.len() != expected {
        let known = |k: &str| {
            k == "meta"
                || ["param/", "exp_avg/", "exp_avg_sq/"].iter().any(|pre| {
                    k.strip_prefix(pre)
                        .is_some_and(|n| p.names().iter().any(|x| x == n))
                })
        };
        let extra = counts
            .keys()
            .find(|k| !known(k))
            .cloned()
            .unwrap_or_default();
        return Err(bad(format!("tensor {extra} is not of this model")));
    }
    Ok((ck.step(), t))
}

/// The checkpoint in `dir` for an optimizer of another layout (ZeRO-1's spans resume from
/// it): the parameters (by index), and the moments of the flat elements `want` only (zeros
/// for a parameter never stepped), read and checked, touching nothing (callers agree
/// across ranks).
pub fn read_flat(
    dir: &Path,
    model: &dyn StagedModel,
    want: &[(usize, usize)],
) -> Result<(Vec<Tensor>, Consolidated)> {
    let p = model.params();
    let off = super::flat_offsets(p.vars().iter().map(|v| v.elem_count()));
    let held = wanted(dir, want, off[p.len()])?;
    let (step, mut t) = read(dir, model, Some(&held))?;
    let (mut params, mut pieces, mut parts) = (Vec::new(), Vec::new(), Vec::new());
    for (i, name) in p.names().iter().enumerate() {
        params.push(t[&format!("param/{name}")].clone());
        let runs = within(&held, off[i], off[i + 1]);
        let kept: usize = runs.iter().map(|(a, b)| b - a).sum();
        let moments = (
            t.remove(&format!("exp_avg/{name}")),
            t.remove(&format!("exp_avg_sq/{name}")),
        );
        parts.push(match moments {
            (Some(m), Some(v)) => (m, v),
            _ => {
                let z = Tensor::zeros(kept, DType::F32, &Device::Cpu)?;
                (z.clone(), z)
            }
        });
        let mut at = 0;
        for (a, b) in runs {
            pieces.push((a, b - a, parts.len() - 1, at));
            at += b - a;
        }
    }
    Ok((params, Consolidated::from_parts(step, pieces, parts)?))
}

fn model_device(dir: &Path, model: &dyn StagedModel) -> Result<Device> {
    let p = model.params();
    if p.is_empty() {
        return Err(bad(dir, "the model has no parameters"));
    }
    Ok(p.var(0).device().clone())
}

//! Sharded checkpoints of [`crate::Zero1`] (safetensors).
//!
//! A checkpoint directory holds `params.safetensors` (written by rank 0: `p.0`, `p.1`, …)
//! and one `shard-{r}-of-{W}.safetensors` per rank (its part of the AdamW moments,
//! `exp_avg` / `exp_avg_sq`, and `meta`). Moments are indexed by the flat position of the
//! element in the parameters' declaration order: a shard's `runs` tensor of (start, len)
//! rows lists the elements it holds, in file order ([`crate::Zero1`]: its contiguous chunk
//! as one run; [`crate::Zero1Overlap`]: its slice of every bucket); a shard without `runs`
//! (written before they existed) holds the r-th contiguous chunk. Any shard layout
//! consolidates to the same flat state, so one optimizer's checkpoint resumes the other.
//! [`consolidate`] merges the shards into one `optimizer.safetensors` (the whole flat
//! moments, padding stripped); resuming reads that file if present, else the shards, so a
//! run can resume on any world size. Every file is written to a temporary name and
//! renamed; reading never writes, and a file that is corrupt or from another model is an
//! error naming it.

use crate::error::{Result, Zero1Error};
use candle_core::{DType, Device, Tensor, Var};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const VERSION: f64 = 1.0;

/// What must match between a checkpoint and the model resuming from it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Signature {
    pub nparams: usize,
    pub numel: usize,
    /// FNV-1a of the shapes, folded to 48 bits (exact in f64).
    pub shapes: u64,
}

impl Signature {
    pub fn of(shapes: &[Vec<usize>]) -> Self {
        let mut h: u64 = 0xcbf29ce484222325;
        for s in shapes {
            for d in s.iter().chain(std::iter::once(&usize::MAX)) {
                for b in (*d as u64).to_le_bytes() {
                    h ^= b as u64;
                    h = h.wrapping_mul(0x100000001b3);
                }
            }
        }
        Self {
            nparams: shapes.len(),
            numel: shapes.iter().map(|s| s.iter().product::<usize>()).sum(),
            shapes: h & ((1 << 48) - 1),
        }
    }
}

/// The whole optimizer state, consolidated.
pub struct Consolidated {
    pub step: u64,
    pub exp_avg: Vec<f32>,
    pub exp_avg_sq: Vec<f32>,
}

fn bad(path: &Path, msg: impl std::fmt::Display) -> Zero1Error {
    Zero1Error::Input(format!("checkpoint {}: {msg}", path.display()))
}

/// Writes `tensors` to `path` atomically (temporary file in the same folder, then rename).
pub fn write_atomic(path: &Path, tensors: &HashMap<String, Tensor>) -> Result<()> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    candle_core::safetensors::save(tensors, &tmp).map_err(|e| bad(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| bad(path, e))?;
    Ok(())
}

pub fn read(path: &Path) -> Result<HashMap<String, Tensor>> {
    candle_core::safetensors::load(path, &Device::Cpu).map_err(|e| bad(path, e))
}

fn take(path: &Path, t: &HashMap<String, Tensor>, name: &str) -> Result<Vec<f32>> {
    let x = t
        .get(name)
        .ok_or_else(|| bad(path, format!("no tensor {name:?}")))?;
    Ok(x.flatten_all()?.to_dtype(DType::F32)?.to_vec1()?)
}

/// `meta`: [version, world, rank, step, nparams, numel, shapes hash].
pub fn meta(world: usize, rank: usize, step: u64, sig: Signature) -> Result<Tensor> {
    let v = [
        VERSION,
        world as f64,
        rank as f64,
        step as f64,
        sig.nparams as f64,
        sig.numel as f64,
        sig.shapes as f64,
    ];
    Ok(Tensor::new(&v[..], &Device::Cpu)?)
}

fn read_meta(path: &Path, t: &HashMap<String, Tensor>) -> Result<(usize, usize, u64, Signature)> {
    let m: Vec<f64> = t
        .get("meta")
        .ok_or_else(|| bad(path, "no tensor \"meta\" (not a zero1 checkpoint)"))?
        .to_dtype(DType::F64)?
        .to_vec1()?;
    if m.len() != 7 || m[0] != VERSION {
        return Err(bad(path, format!("unknown format {m:?}")));
    }
    let sig = Signature {
        nparams: m[4] as usize,
        numel: m[5] as usize,
        shapes: m[6] as u64,
    };
    Ok((m[1] as usize, m[2] as usize, m[3] as u64, sig))
}

fn shard_files(dir: &Path) -> Result<Vec<(usize, usize, PathBuf)>> {
    let mut out = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| bad(dir, e))?;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(rest) = name
            .strip_prefix("shard-")
            .and_then(|r| r.strip_suffix(".safetensors"))
        else {
            continue;
        };
        let Some((r, w)) = rest.split_once("-of-") else {
            continue;
        };
        if let (Ok(r), Ok(w)) = (r.parse(), w.parse()) {
            out.push((r, w, e.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// Fails, naming `path`, when the checkpoint's model signature is not this model's.
fn same_model(path: &Path, found: Signature, want: Signature) -> Result<()> {
    if found == want {
        return Ok(());
    }
    Err(bad(
        path,
        format!(
            "from another model: {} parameters of {} elements (shape hash {:x}), this model has {} of {} ({:x})",
            found.nparams, found.numel, found.shapes, want.nparams, want.numel, want.shapes
        ),
    ))
}

/// Reads the optimizer state: `optimizer.safetensors` if present, else the shards (all
/// ranks of one world size). Checks every file against `sig`.
pub fn read_optimizer(dir: &Path, sig: Signature) -> Result<Consolidated> {
    let whole = dir.join("optimizer.safetensors");
    if whole.exists() {
        let t = read(&whole)?;
        let (_, _, step, s) = read_meta(&whole, &t)?;
        same_model(&whole, s, sig)?;
        let (m, v) = (
            take(&whole, &t, "exp_avg")?,
            take(&whole, &t, "exp_avg_sq")?,
        );
        if m.len() != sig.numel || v.len() != sig.numel {
            return Err(bad(&whole, "moments of the wrong length"));
        }
        return Ok(Consolidated {
            step,
            exp_avg: m,
            exp_avg_sq: v,
        });
    }
    let files = shard_files(dir)?;
    let Some(&(_, w, _)) = files.first() else {
        return Err(bad(
            dir,
            "no optimizer.safetensors and no shard-*-of-*.safetensors",
        ));
    };
    if files.iter().any(|f| f.1 != w)
        || files.len() != w
        || files.iter().enumerate().any(|(i, f)| f.0 != i)
    {
        let names: Vec<String> = files
            .iter()
            .map(|f| format!("{}-of-{}", f.0, f.1))
            .collect();
        return Err(bad(
            dir,
            format!("shards {names:?} are not ranks 0..W of one world size W"),
        ));
    }
    let n = sig.numel;
    let (mut m, mut v) = (vec![0f32; n], vec![0f32; n]);
    let mut seen = vec![false; n];
    let mut step0 = None;
    for (r, _, path) in &files {
        let t = read(path)?;
        let (fw, fr, step, s) = read_meta(path, &t)?;
        same_model(path, s, sig)?;
        if (fw, fr) != (w, *r) || step0.is_some_and(|s0| s0 != step) {
            return Err(bad(
                path,
                format!("meta says rank {fr} of {fw} at step {step}"),
            ));
        }
        step0 = Some(step);
        let (fm, fv) = (take(path, &t, "exp_avg")?, take(path, &t, "exp_avg_sq")?);
        let runs = match t.get("runs") {
            Some(x) => x
                .to_dtype(DType::I64)?
                .to_vec2::<i64>()
                .map_err(|e| bad(path, format!("runs: {e}")))?
                .into_iter()
                .map(|r| (r[0].max(0) as usize, r[1].max(0) as usize))
                .collect(),
            // A contiguous chunk of the flat moments padded to a multiple of W.
            None => vec![(r * n.div_ceil(w), n.div_ceil(w))],
        };
        let total: usize = runs.iter().map(|r| r.1).sum();
        if fm.len() != total || fv.len() != total {
            return Err(bad(
                path,
                format!("{} moments for runs of {total} elements", fm.len()),
            ));
        }
        let mut off = 0;
        for (start, len) in runs {
            // Elements past the model (a chunk's padding) are dropped.
            for k in 0..len.min(n.saturating_sub(start)) {
                if std::mem::replace(&mut seen[start + k], true) {
                    return Err(bad(path, format!("element {} is in two shards", start + k)));
                }
                m[start + k] = fm[off + k];
                v[start + k] = fv[off + k];
            }
            off += len;
        }
    }
    if let Some(i) = seen.iter().position(|&x| !x) {
        return Err(bad(
            dir,
            format!("no shard holds the moments of element {i}"),
        ));
    }
    Ok(Consolidated {
        step: step0.unwrap_or(0),
        exp_avg: m,
        exp_avg_sq: v,
    })
}

/// Writes this rank's shard: moments `m`, `v` of the flat elements listed by `runs`
/// ((start, len) in declaration order, in the order of `m`).
#[allow(clippy::too_many_arguments)]
pub fn write_shard(
    dir: &Path,
    world: usize,
    rank: usize,
    step: u64,
    sig: Signature,
    runs: &[(usize, usize)],
    m: Vec<f32>,
    v: Vec<f32>,
) -> Result<()> {
    let cpu = Device::Cpu;
    let n = m.len();
    let flat: Vec<i64> = runs.iter().flat_map(|r| [r.0 as i64, r.1 as i64]).collect();
    let mut t = HashMap::new();
    t.insert("exp_avg".to_string(), Tensor::from_vec(m, n, &cpu)?);
    t.insert("exp_avg_sq".to_string(), Tensor::from_vec(v, n, &cpu)?);
    t.insert(
        "runs".to_string(),
        Tensor::from_vec(flat, (runs.len(), 2), &cpu)?,
    );
    t.insert("meta".to_string(), meta(world, rank, step, sig)?);
    write_atomic(
        &dir.join(format!("shard-{rank}-of-{world}.safetensors")),
        &t,
    )
}

/// Writes `params.safetensors` (rank 0's job): every parameter and `meta`.
pub fn write_params(
    dir: &Path,
    params: &[Var],
    world: usize,
    step: u64,
    sig: Signature,
) -> Result<()> {
    let mut p = HashMap::new();
    for (i, v) in params.iter().enumerate() {
        p.insert(format!("p.{i}"), v.as_tensor().to_device(&Device::Cpu)?);
    }
    p.insert("meta".to_string(), meta(world, 0, step, sig)?);
    write_atomic(&dir.join("params.safetensors"), &p)
}

/// Merges a directory's shards into `optimizer.safetensors` (then the shards may go).
pub fn consolidate(dir: &Path, shapes: &[Vec<usize>]) -> Result<()> {
    let sig = Signature::of(shapes);
    let c = read_optimizer(dir, sig)?;
    let n = c.exp_avg.len();
    let mut t = HashMap::new();
    t.insert(
        "exp_avg".to_string(),
        Tensor::from_vec(c.exp_avg, n, &Device::Cpu)?,
    );
    t.insert(
        "exp_avg_sq".to_string(),
        Tensor::from_vec(c.exp_avg_sq, n, &Device::Cpu)?,
    );
    t.insert("meta".to_string(), meta(1, 0, c.step, sig)?);
    write_atomic(&dir.join("optimizer.safetensors"), &t)
}

/// The shapes of `params`, what a checkpoint's [`Signature`] and parameter check use.
pub fn shapes(params: &[Var]) -> Vec<Vec<usize>> {
    params.iter().map(|p| p.dims().to_vec()).collect()
}

/// Creates the checkpoint directory `dir`, or an error naming it.
pub fn create_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| bad(dir, e))
}

/// Reads and validates `dir`'s parameters and optimizer state for `params`, touching
/// nothing (callers agree across ranks, then [`set_params`]).
pub fn read_all(dir: &Path, params: &[Var]) -> Result<(Vec<Tensor>, Consolidated)> {
    let shp = shapes(params);
    let loaded = read_params(dir, &shp)?;
    Ok((loaded, read_optimizer(dir, Signature::of(&shp))?))
}

/// Copies checkpoint tensors (from [`read_all`]) into `params`, on their device, in f32.
pub fn set_params(params: &[Var], loaded: &[Tensor]) -> Result<()> {
    for (p, t) in params.iter().zip(loaded) {
        p.set(&t.to_dtype(DType::F32)?.to_device(p.device())?)?;
    }
    Ok(())
}

/// Parameters from `params.safetensors`, checked against `shapes`.
pub fn read_params(dir: &Path, shapes: &[Vec<usize>]) -> Result<Vec<Tensor>> {
    let path = dir.join("params.safetensors");
    let t = read(&path)?;
    let (_, _, _, s) = read_meta(&path, &t)?;
    let sig = Signature::of(shapes);
    same_model(&path, s, sig)?;
    (0..shapes.len())
        .map(|i| {
            t.get(&format!("p.{i}"))
                .cloned()
                .ok_or_else(|| bad(&path, format!("no tensor p.{i}")))
        })
        .collect()
}

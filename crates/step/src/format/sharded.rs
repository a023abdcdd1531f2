//! Sharded checkpoints (zero1's `Zero1`, `Zero1Overlap` and `ShardedOptimizer`), in the format of
//! the `checkpoint` crate (a `manifest.json` written last ties every file to one step,
//! with sizes and CRC-32s; see that crate).
//!
//! A checkpoint directory holds `params.safetensors` (written by rank 0: `p.0`, `p.1`, …)
//! and one `shard-{r}-of-{W}.safetensors` per rank (its part of the AdamW moments,
//! `exp_avg` / `exp_avg_sq`, and `meta`). Moments are indexed by the flat position of the
//! element in the parameters' declaration order: a shard's `runs` tensor of (start, len)
//! rows lists the elements it holds, in file order (`Zero1`: its contiguous chunk
//! as one run; `Zero1Overlap`: its slice of every bucket). Any shard layout
//! consolidates to the same flat state, so one optimizer's checkpoint resumes the other.
//! [`consolidate`] replaces the shards by one `optimizer.safetensors` (the whole flat
//! moments, padding stripped) under a new manifest; resuming reads that file only if the
//! manifest lists it, else the manifest's shards, so a run can resume on any world size.
//! A resuming rank holds only the moments of the elements it will keep ([`read_optimizer`]
//! in `state.rs`), and no parameter until it sets it: `params.safetensors` is checked
//! whole holding none ([`check_params`]), the ranks agree, then it is read again, each
//! parameter set as it arrives ([`Params::set`]). Reading never writes; a missing, extra, corrupt or other-step file, or
//! one from another model, is an error naming it.

use ::checkpoint::error::{CheckpointError, Result};
use ::checkpoint::{Checkpoint, Entry, Files, Pieces};
use candle_core::{DType, Device, Tensor, Var};
use comm::Communicator;
use std::collections::HashMap;
use std::path::Path;

pub use super::state::{read_optimizer, Consolidated};

const VERSION: f64 = 1.0;
pub const PARAMS: &str = "params.safetensors";
pub const OPTIMIZER: &str = "optimizer.safetensors";

pub fn shard_name(rank: usize, world: usize) -> String {
    format!("shard-{rank}-of-{world}.safetensors")
}

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

pub(super) fn bad(path: &Path, msg: impl std::fmt::Display) -> CheckpointError {
    ::checkpoint::error::bad(path, msg)
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

/// A file's `meta` (world, rank, step, signature), checked against this model and the
/// manifest's step.
pub(super) fn read_meta(
    ck: &Checkpoint,
    name: &str,
    t: &HashMap<String, Tensor>,
    want: Signature,
) -> Result<(usize, usize)> {
    let path = ck.dir().join(name);
    let m: Vec<f64> = t
        .get("meta")
        .ok_or_else(|| bad(&path, "no tensor \"meta\" (not a zero1 checkpoint)"))?
        .to_dtype(DType::F64)?
        .to_vec1()?;
    if m.len() != 7 || m[0] != VERSION {
        return Err(bad(&path, format!("unknown format {m:?}")));
    }
    let found = Signature {
        nparams: m[4] as usize,
        numel: m[5] as usize,
        shapes: m[6] as u64,
    };
    if found != want {
        return Err(bad(
            &path,
            format!(
                "from another model: {} parameters of {} elements (shape hash {:x}), this model has {} of {} ({:x})",
                found.nparams, found.numel, found.shapes, want.nparams, want.numel, want.shapes
            ),
        ));
    }
    if m[3] != ck.step() as f64 {
        let msg = format!("meta step {}, manifest.json step {}", m[3], ck.step());
        return Err(bad(&path, msg));
    }
    Ok((m[1] as usize, m[2] as usize))
}

/// Moments of one rank: its runs ((start, len) of the flat elements, in declaration
/// order) and `exp_avg`, `exp_avg_sq` in run order, each made in pieces as the file is
/// written (so that the host holds one piece at a time: a span's moment, copied alone).
pub struct Moments<'a> {
    pub runs: Vec<(usize, usize)>,
    pub exp_avg: Pieces<'a>,
    pub exp_avg_sq: Pieces<'a>,
}

impl Moments<'static> {
    /// From both moments whole on the host.
    pub fn from_vecs(runs: Vec<(usize, usize)>, m: Vec<f32>, v: Vec<f32>) -> Result<Self> {
        let one = |x: Vec<f32>| -> Result<Pieces<'static>> {
            let n = x.len();
            let t = Tensor::from_vec(x, n, &Device::Cpu)?;
            Ok(Pieces::new(DType::F32, n, std::iter::once(Ok(t))))
        };
        Ok(Self {
            runs,
            exp_avg: one(m)?,
            exp_avg_sq: one(v)?,
        })
    }
}

/// A shard file's entries: `moments` and their `runs`, and `meta`.
pub fn shard_entries<'a>(
    world: usize,
    rank: usize,
    step: u64,
    sig: Signature,
    moments: Moments<'a>,
) -> Result<HashMap<String, Entry<'a>>> {
    let runs = &moments.runs;
    let flat: Vec<i64> = runs.iter().flat_map(|r| [r.0 as i64, r.1 as i64]).collect();
    let runs = Tensor::from_vec(flat, (runs.len(), 2), &Device::Cpu)?;
    Ok(HashMap::from([
        ("exp_avg".to_string(), Entry::Pieces(moments.exp_avg)),
        ("exp_avg_sq".to_string(), Entry::Pieces(moments.exp_avg_sq)),
        ("runs".to_string(), Entry::Tensor(runs)),
        (
            "meta".to_string(),
            Entry::Tensor(meta(world, rank, step, sig)?),
        ),
    ]))
}

/// Saves one checkpoint (collective, every rank): this rank's shard (from `moments`, whose
/// error type `E` is the caller's) and, on rank 0, `params`. Returns once the manifest is
/// written; fails on every rank if any rank fails, leaving no manifest.
pub fn save<'a, E>(
    comm: &dyn Communicator,
    dir: &Path,
    params: &[Var],
    step: u64,
    moments: impl FnOnce() -> Result<Moments<'a>, E>,
) -> Result<(), E>
where
    E: From<CheckpointError> + std::fmt::Display,
{
    let dev = params
        .first()
        .ok_or_else(|| bad(dir, "save: no parameters"))?
        .device()
        .clone();
    let tensors: Vec<Tensor> = params.iter().map(|v| v.as_tensor().clone()).collect();
    save_tensors(comm, &dev, dir, &tensors, step, moments)
}

/// [`save`] from the parameters' values as tensors (on `dev`, or on the host), where a
/// parameter has no whole `Var` (a released f32 master, gathered for the save): only rank
/// 0 reads the values; the other ranks' tensors give the shapes (a broadcast placeholder
/// will do). `dev`: the device the ranks agree on.
pub fn save_tensors<'a, E>(
    comm: &dyn Communicator,
    dev: &Device,
    dir: &Path,
    params: &[Tensor],
    step: u64,
    moments: impl FnOnce() -> Result<Moments<'a>, E>,
) -> Result<(), E>
where
    E: From<CheckpointError> + std::fmt::Display,
{
    let dev = dev.clone();
    let (w, r) = (comm.world_size(), comm.rank());
    let sig = Signature::of(&params.iter().map(|p| p.dims().to_vec()).collect::<Vec<_>>());
    ::checkpoint::save(
        comm,
        &dev,
        dir,
        step,
        |files: &mut Files| -> Result<(), E> {
            let m = moments()?;
            files.put_entries(&shard_name(r, w), shard_entries(w, r, step, sig, m)?)?;
            if r == 0 {
                let mut p = HashMap::new();
                // On the device: `put` copies them to the host one at a time.
                for (i, v) in params.iter().enumerate() {
                    p.insert(format!("p.{i}"), v.clone());
                }
                p.insert("meta".to_string(), meta(w, 0, step, sig)?);
                files.put(PARAMS, &p)?;
            }
            Ok(())
        },
    )?;
    Ok(())
}

/// Replaces a checkpoint's shards by one `optimizer.safetensors` (under a new manifest,
/// atomically; the shards are removed after it). One process calls it.
pub fn consolidate(dir: &Path, shapes: &[Vec<usize>]) -> Result<()> {
    let sig = Signature::of(shapes);
    let ck = Checkpoint::open(dir)?;
    let c = read_optimizer(&ck, sig, &[(0, sig.numel)])?;
    let shards: Vec<String> = (0..ck.world_size())
        .map(|r| shard_name(r, ck.world_size()))
        .filter(|s| ck.contains(s))
        .collect();
    // The parts as read, written a part at a time: one copy of the moments on the host.
    let t = HashMap::from([
        (
            "exp_avg".to_string(),
            Entry::Pieces(c.pieces(seam::Moment::ExpAvg)),
        ),
        (
            "exp_avg_sq".to_string(),
            Entry::Pieces(c.pieces(seam::Moment::ExpAvgSq)),
        ),
        ("meta".to_string(), Entry::Tensor(meta(1, 0, c.step, sig)?)),
    ]);
    let remove: Vec<&str> = shards.iter().map(String::as_str).collect();
    ck.replace_entries(vec![(OPTIMIZER, t)], &remove)?;
    Ok(())
}

/// The shapes of `params`, what a checkpoint's [`Signature`] and parameter check use.
pub fn shapes(params: &[Var]) -> Vec<Vec<usize>> {
    params.iter().map(|p| p.dims().to_vec()).collect()
}

/// Reads and validates `dir`'s parameters, and the optimizer state of the flat elements
/// `want` ([`read_optimizer`]), for `params`, touching nothing and holding no parameter
/// (callers agree across ranks, then [`Params::set`], and agree again).
pub fn read_all(
    dir: &Path,
    params: &[Var],
    want: &[(usize, usize)],
) -> Result<(Params, Consolidated)> {
    let ck = Checkpoint::open(dir)?;
    let shp = shapes(params);
    check_params(&ck, &shp)?;
    let state = read_optimizer(&ck, Signature::of(&shp), want)?;
    Ok((Params::Verified(ck), state))
}

/// The parameters a resume sets: read already (a DDP checkpoint's), or in a checkpoint
/// whose `params.safetensors` was verified ([`check_params`]), read again as they are set.
pub enum Params {
    Read(Vec<Tensor>),
    Verified(Checkpoint),
}

impl Params {
    /// Sets `vars` (in f32, on their device) from the checkpoint, one tensor at a time: a
    /// verified file is read again, so the host holds one parameter at a time. Only a file
    /// changed since its check fails here, and then with the parameters partly set:
    /// callers agree on the result across ranks.
    pub fn set(&self, vars: &[Var]) -> Result<()> {
        let ck = match self {
            Params::Read(t) => return set_params(vars, t),
            Params::Verified(ck) => ck,
        };
        let mut seen = vec![false; vars.len()];
        let params = |k: &str, _: &[usize], _: &_| match k.starts_with("p.") {
            true => ::checkpoint::Part::Whole,
            false => ::checkpoint::Part::Skip,
        };
        ck.load_each(PARAMS, params, |k, t| {
            let i = (k[2..].parse::<usize>().ok())
                .filter(|&i| i < vars.len())
                .ok_or("not a parameter of this model")?;
            let t = t.to_dtype(DType::F32).map_err(|e| e.to_string())?;
            (t.to_device(vars[i].device()).and_then(|t| vars[i].set(&t)))
                .map_err(|e| e.to_string())?;
            seen[i] = true;
            Ok(())
        })?;
        match seen.iter().position(|&x| !x) {
            Some(i) => Err(bad(&ck.dir().join(PARAMS), format!("no tensor p.{i}"))),
            None => Ok(()),
        }
    }
}

/// Copies checkpoint tensors into `params`, on their device, in f32.
fn set_params(params: &[Var], loaded: &[Tensor]) -> Result<()> {
    for (p, t) in params.iter().zip(loaded) {
        p.set(&t.to_dtype(DType::F32)?.to_device(p.device())?)?;
    }
    Ok(())
}

/// Checks `params.safetensors` against `shapes` (its `meta`, and a tensor `p.{i}` of each
/// shape), holding none of the parameters: its bytes are summed as they pass.
pub fn check_params(ck: &Checkpoint, shapes: &[Vec<usize>]) -> Result<()> {
    let path = ck.dir().join(PARAMS);
    let mut found = HashMap::new();
    let t = ck.load_parts(PARAMS, |k, shape, _| match k {
        "meta" => ::checkpoint::Part::Whole,
        _ => {
            found.insert(k.to_string(), shape.to_vec());
            ::checkpoint::Part::Skip
        }
    })?;
    read_meta(ck, PARAMS, &t, Signature::of(shapes))?;
    for (i, s) in shapes.iter().enumerate() {
        match found.get(&format!("p.{i}")) {
            None => return Err(bad(&path, format!("no tensor p.{i}"))),
            Some(f) if f != s => {
                let msg = format!("tensor p.{i} has shape {f:?}, the model's {s:?}");
                return Err(bad(&path, msg));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

//! Training checkpoints: `checkpoints/step-{N:08}/`, each one checkpoint of the
//! `checkpoint` crate (weights and optimizer state through [`Engine::save`], then
//! `train.safetensors` added under a new manifest by [`checkpoint::Checkpoint::replace`]:
//! the step, the seeds, the run's configuration as JSON). The schedule's position and the
//! sampler's state are functions of the step and the seeds, so these are all the state.
//! A checkpoint without `train.safetensors` (killed between the two writes) is
//! incomplete. Resume takes the newest complete one and names each newer one it skips.

use crate::config::TrainConfig;
use crate::engine::Engine;
use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use checkpoint::Checkpoint;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// `bail!` with the error marked as the user's (crate::UserError: exit code 2, not retried
/// by a restarting launcher).
macro_rules! user {
    ($($t:tt)*) => {
        return Err(crate::UserError(format!($($t)*)).into())
    };
}

pub const STATE_FILE: &str = "train.safetensors";
const VERSION: f64 = 1.0;

pub fn step_dir(root: &Path, step: u64) -> PathBuf {
    root.join(format!("step-{step:08}"))
}

/// Refuses, before any step is trained, a step name under `root` that is not a
/// directory: the save of that step would fail only when the run reaches it.
pub fn check_names(root: &Path) -> Result<()> {
    for (_, p) in list(root)? {
        if !p.symlink_metadata().is_ok_and(|m| m.is_dir()) {
            user!(
                "{}: not a checkpoint directory, yet named like one; the run would fail when it saves that step: move it away",
                p.display()
            );
        }
    }
    Ok(())
}

/// Step directories under `root`, newest first.
pub fn list(root: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let mut v = Vec::new();
    let rd = match std::fs::read_dir(root) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(v),
        Err(e) => return Err(e).with_context(|| format!("listing {}", root.display())),
    };
    for e in rd {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(n) = name
            .strip_prefix("step-")
            .and_then(|n| n.parse::<u64>().ok())
        {
            v.push((n, e.path()));
        }
    }
    v.sort_by_key(|x| std::cmp::Reverse(x.0));
    Ok(v)
}

/// The manifest directory of a step directory (zero1 keeps it in `group-0/`).
pub fn manifest_dir(dir: &Path) -> PathBuf {
    if dir.join("group-0").is_dir() {
        dir.join("group-0")
    } else {
        dir.to_path_buf()
    }
}

/// Reads and checks a step directory's training state: (step, configuration).
pub fn read(dir: &Path) -> Result<(u64, TrainConfig)> {
    let ck = Checkpoint::open(&manifest_dir(dir))?;
    ck.verify()?;
    if !ck.contains(STATE_FILE) {
        bail!(
            "checkpoint {} has no {STATE_FILE} (interrupted before the training state was written)",
            dir.display()
        );
    }
    let t = ck.load(STATE_FILE)?;
    let p = manifest_dir(dir).join(STATE_FILE);
    let state: Vec<f64> = t
        .get("state")
        .with_context(|| format!("{}: no tensor \"state\"", p.display()))?
        .to_vec1()?;
    let json: Vec<u8> = t
        .get("config")
        .with_context(|| format!("{}: no tensor \"config\"", p.display()))?
        .to_vec1()?;
    let cfg: TrainConfig =
        serde_json::from_slice(&json).with_context(|| format!("{}: configuration", p.display()))?;
    if state.len() != 2 || state[0] != VERSION || state[1] as u64 != ck.step() {
        bail!(
            "{}: unknown format or another step ({state:?}, manifest step {})",
            p.display(),
            ck.step()
        );
    }
    Ok((ck.step(), cfg))
}

/// A complete checkpoint: its step, step directory and configuration.
pub type Found = (u64, PathBuf, TrainConfig);

/// The newest complete checkpoint under `root`, with the reasons newer ones were skipped.
pub fn newest(root: &Path) -> Result<(Option<Found>, Vec<String>)> {
    let mut skipped = Vec::new();
    for (n, dir) in list(root)? {
        match read(&dir) {
            Ok((step, cfg)) if step == n => return Ok((Some((step, dir, cfg)), skipped)),
            Ok((step, _)) => skipped.push(format!("{}: holds step {step}", dir.display())),
            Err(e) => skipped.push(format!("{e:#}")),
        }
    }
    Ok((None, skipped))
}

/// Which data a run trains on: the directory it was given and the identity of its
/// contents (FNV-1a of its `meta.json`, which holds the tokenizer's hash, the token counts
/// and the source). Recorded in every checkpoint and checked on resume.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DataId {
    pub dir: String,
    pub id: String,
}

impl DataId {
    pub fn of(ds: &crate::data::Dataset) -> Result<Self> {
        Ok(Self {
            dir: ds.dir.display().to_string(),
            id: crate::data::fnv1a(&serde_json::to_vec(&ds.meta)?),
        })
    }
}

/// A new run's identity: 16 hex digits from the clock, the pid and the host. It is kept
/// in `config.json` and in every checkpoint, and a resumed run keeps its checkpoint's.
pub fn new_run_id() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let host = crate::rundir::host();
    crate::data::fnv1a(format!("{now} {} {host}", std::process::id()).as_bytes())
}

/// The run identity a step directory's checkpoint recorded (`None`: written before it
/// was recorded).
pub fn read_run(dir: &Path) -> Result<Option<String>> {
    let t = Checkpoint::open(&manifest_dir(dir))?.load(STATE_FILE)?;
    let Some(bytes) = t.get("run") else {
        return Ok(None);
    };
    let bytes: Vec<u8> = bytes.to_vec1()?;
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

/// The data identity a step directory's checkpoint recorded (`None`: written before it
/// was recorded).
pub fn read_data(dir: &Path) -> Result<Option<DataId>> {
    let ck = Checkpoint::open(&manifest_dir(dir))?;
    let t = ck.load(STATE_FILE)?;
    let Some(json) = t.get("data") else {
        return Ok(None);
    };
    let json: Vec<u8> = json.to_vec1()?;
    let p = manifest_dir(dir).join(STATE_FILE);
    Ok(Some(serde_json::from_slice(&json).with_context(|| {
        format!("{}: data identity", p.display())
    })?))
}

/// Saves step `step` into `root` (collective), then removes all but the newest `keep`.
/// What a save wrote, and how long the run waited for it.
pub struct Saved {
    pub dir: PathBuf,
    /// The checkpoint's bytes, every rank's files (rank 0 reads their sizes).
    pub bytes: u64,
    pub seconds: f64,
}

impl std::fmt::Display for Saved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let gb = self.bytes as f64 / 1e9;
        write!(
            f,
            "checkpoint {}: {:.2} GiB written in {:.2} s ({:.2} GB/s; training waited for it)",
            self.dir.display(),
            self.bytes as f64 / (1u64 << 30) as f64,
            self.seconds,
            gb / self.seconds.max(1e-9)
        )
    }
}

/// The bytes of the files under `dir`.
fn bytes_in(dir: &Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |d| {
        d.filter_map(|e| e.ok())
            .map(|e| match e.metadata() {
                Ok(m) if m.is_dir() => bytes_in(&e.path()),
                Ok(m) => m.len(),
                Err(_) => 0,
            })
            .sum()
    })
}

pub fn save(
    e: &mut Engine,
    root: &Path,
    step: u64,
    (cfg, data, run): (&TrainConfig, &DataId, &str),
    keep: usize,
) -> Result<Saved> {
    let t0 = std::time::Instant::now();
    let dir = step_dir(root, step);
    if e.comm.rank() == 0 && dir.symlink_metadata().is_ok() {
        // A run killed while saving this step left it (the resume took an older
        // checkpoint, so this one is incomplete): this save replaces it whole.
        eprintln!(
            "train: {}: replacing an incomplete checkpoint left by an interrupted save",
            dir.display()
        );
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    e.comm.barrier()?;
    e.save(&dir)?;
    if e.comm.rank() == 0 {
        let json = serde_json::to_vec(cfg)?;
        let mut t = HashMap::new();
        t.insert(
            "state".to_string(),
            Tensor::new(&[VERSION, step as f64], &Device::Cpu)?,
        );
        t.insert(
            "config".to_string(),
            Tensor::from_vec(json.clone(), json.len(), &Device::Cpu)?.to_dtype(DType::U8)?,
        );
        for (k, bytes) in [
            ("data", serde_json::to_vec(data)?),
            ("run", run.as_bytes().to_vec()),
        ] {
            let n = bytes.len();
            t.insert(
                k.to_string(),
                Tensor::from_vec(bytes, n, &Device::Cpu)?.to_dtype(DType::U8)?,
            );
        }
        Checkpoint::open(&e.manifest_dir(&dir))?.replace(&[(STATE_FILE, t)], &[])?;
        for (_, old) in list(root)?.into_iter().skip(keep.max(1)) {
            std::fs::remove_dir_all(&old).with_context(|| format!("removing {}", old.display()))?;
        }
    }
    e.comm.barrier()?;
    Ok(Saved {
        bytes: bytes_in(&dir),
        seconds: t0.elapsed().as_secs_f64(),
        dir,
    })
}

/// Resumes from the newest complete checkpoint under `root` that every rank agrees on;
/// returns its step (0 and nothing loaded if there is none) and the run identity it
/// recorded. Refuses one written under another configuration, naming the fields, or on
/// other data, naming both directories.
pub fn resume(
    e: &mut Engine,
    root: &Path,
    cfg: &TrainConfig,
    data: &DataId,
) -> Result<(u64, Option<String>)> {
    let (found, skipped) = newest(root)?;
    if e.comm.rank() == 0 {
        for s in &skipped {
            eprintln!("train: skipping a checkpoint that cannot be used: {s}");
        }
    }
    let mine = found.as_ref().map_or(-1.0, |f| f.0 as f64);
    let t = Tensor::new(&[mine, -mine], &e.dev)?;
    e.comm.all_reduce(&t, comm::ReduceOp::Max)?;
    let v = t.to_device(&Device::Cpu)?.to_vec1::<f64>()?;
    if v[0] != -v[1] {
        bail!("ranks found different newest checkpoints under {} (this rank: {mine}); is the directory shared?", root.display());
    }
    let Some((step, dir, saved)) = found else {
        return Ok((0, None));
    };
    if let Some(theirs) = read_data(&dir)?.filter(|d| d.id != data.id) {
        user!(
            "checkpoint {} was trained on the data in {} (identity {}); --data {} holds other data (identity {}): resume with --data {}, or start afresh with --fresh",
            dir.display(),
            theirs.dir,
            theirs.id,
            data.dir,
            data.id,
            theirs.dir
        );
    }
    let diff = saved.differences(cfg);
    if !diff.is_empty() {
        user!(
            "checkpoint {} was written by another configuration: {}",
            dir.display(),
            diff.join("; ")
        );
    }
    if e.comm.rank() == 0 {
        for c in saved.changes(cfg) {
            eprintln!("train: resuming {} with {c}", dir.display());
        }
    }
    let got = e.resume(&dir)?;
    if got != step {
        bail!(
            "checkpoint {}: the optimizer state is of step {got}, the training state of {step}",
            dir.display()
        );
    }
    Ok((step, read_run(&dir)?))
}

/// A non-finite loss or norm after step `step` stops the run (every rank sees the same
/// value: they are means over the ranks): nothing from that step on is logged or saved,
/// so the log and the checkpoints stay readable, and the error says where to go on from.
pub(crate) fn diverged(ckpts: &Path, step: u64, what: &str, v: f64) -> Result<()> {
    if v.is_finite() {
        return Ok(());
    }
    let newest = list(ckpts)
        .ok()
        .and_then(|l| l.first().map(|(_, d)| d.display().to_string()));
    bail!(
        "step {step}: the {what} is {v}: training diverged; nothing from step {step} on was logged or saved ({}). Lower --lr and start again with --fresh",
        newest.map_or("no checkpoint yet".to_string(), |d| format!("the newest checkpoint is {d}"))
    )
}

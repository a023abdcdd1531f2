//! `bench zero1-check`: ZeRO-1 checkpoints on the real backend. On every rank, the tiny LM
//! is trained through the step users run (`step::TrainStep` with `zero1::Zero1Overlap`:
//! `Zero1Overlap`, gather-ahead on, small buckets) for `steps` steps on a
//! global batch sharded over the ranks, saving a sharded checkpoint after `save_at` steps;
//! a fresh model (other seed) and optimizer with another bucket layout then resume from
//! that checkpoint and run the remaining steps again. Checked: the resumed weights equal
//! the uninterrupted ones, every rank holds the same weights, and (rank 0) both equal
//! single-process AdamW on the whole batch within atol 1e-5 + rtol 1.3e-6 (the ddp check's
//! rule); any NaN or inf in the weights fails. Fails (every rank) naming what differs.
//!
//! `--dir` must be new or an empty directory (a file or a non-empty directory is refused,
//! naming it, on every rank before any collective): the check never deletes what it did
//! not create. After a passing check it removes the checkpoint it wrote (and the
//! directory, if it created it); after a failing one it keeps it for inspection.

use anyhow::{bail, Result};
use candle_core::{Device, Tensor};
use comm::{Communicator, ReduceOp};
use ddp::{check, shard_batch, Strategy};
use model::{AdamWConfig, StagedModel};
use std::path::Path;
use std::sync::Arc;
use step::{StepOptions, TrainStep};
use zero1::Zero1Overlap;

fn tiny(seed: u64, dev: &Device) -> Result<Box<dyn StagedModel>> {
    Ok(model::named::build("tiny", seed, dev)?)
}

fn global_batch(step: usize, b: usize, dev: &Device) -> Result<model::Batch> {
    Ok(model::named::global_batch("tiny", step as u64, b, dev)?)
}

fn weights(m: &dyn StagedModel) -> Result<Vec<Tensor>> {
    Ok(m.params()
        .vars()
        .iter()
        .map(|v| v.as_tensor().copy())
        .collect::<candle_core::Result<_>>()?)
}

/// Fails naming `what` and the first tensor holding a NaN or inf.
fn finite(what: &str, ts: &[Tensor]) -> Result<()> {
    for (i, t) in ts.iter().enumerate() {
        let v: Vec<f32> = t
            .flatten_all()?
            .to_dtype(candle_core::DType::F32)?
            .to_vec1()?;
        if let Some(x) = v.iter().find(|x| !x.is_finite()) {
            bail!("{what}: parameter {i} holds {x}");
        }
    }
    Ok(())
}

/// Largest |a - b| and largest |a - b| / (1e-5 + 1.3e-6 |b|) over all tensors; an error
/// if either side holds a NaN or inf (a max over NaN would hide it).
fn compare(a: &[Tensor], b: &[Tensor]) -> Result<(f32, f32)> {
    finite("left side", a)?;
    finite("right side", b)?;
    let (mut abs, mut ratio) = (0f32, 0f32);
    for (x, y) in a.iter().zip(b) {
        abs = abs.max(check::max_abs_diff(x, y)?);
        ratio = ratio.max(check::worst_ratio(x, y, 1e-5, 1.3e-6)?);
    }
    Ok((abs, ratio))
}

/// The verdict on [max|resumed - straight|, max|rank - rank 0|, max|w - single|, worst
/// ratio, non-finite weights on any rank]: written so that a NaN anywhere fails.
fn passes(v: &[f32], tol: f32) -> bool {
    v[0] <= tol && v[1] == 0.0 && v[3] <= 1.0 && v[4] == 0.0 && v.iter().all(|x| x.is_finite())
}

/// `--tol`: a finite, non-negative number.
pub fn check_tol(tol: f32) -> Result<()> {
    if !(tol.is_finite() && tol >= 0.0) {
        bail!("--tol {tol}: must be a finite number >= 0");
    }
    Ok(())
}

/// `--dir`: refused, naming it, if it is not a directory or is a non-empty one (nothing
/// is ever deleted that this check did not create). Returns whether it exists already.
pub fn check_dir(dir: &Path) -> Result<bool> {
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => bail!("--dir {}: {e}", dir.display()),
        Ok(m) if !m.is_dir() => bail!("--dir {}: exists and is not a directory", dir.display()),
        Ok(_) => {
            let mut it = std::fs::read_dir(dir)
                .map_err(|e| anyhow::anyhow!("--dir {}: {e}", dir.display()))?;
            if let Some(e) = it.next() {
                let name = e.map(|e| e.file_name()).unwrap_or_default();
                bail!(
                    "--dir {}: not empty (holds {name:?}, ...); zero1-check writes a fresh checkpoint and deletes nothing it did not create: give a new or empty directory",
                    dir.display()
                );
            }
            Ok(true)
        }
    }
}

/// Removes the checkpoint this check wrote in `dir` (the manifest's files, then the
/// manifest) and `dir` itself if the check created it and it is empty.
fn remove_checkpoint(dir: &Path, existed: bool) -> Result<()> {
    let manifest = dir.join("manifest.json");
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&manifest)?)?;
    let files = m["files"].as_array().cloned().unwrap_or_default();
    for name in files.iter().filter_map(|f| f["name"].as_str()) {
        // Only plain names inside `dir` (the manifest was checked when resumed).
        if !name.contains(['/', '\\']) && !name.starts_with('.') {
            std::fs::remove_file(dir.join(name))?;
        }
    }
    std::fs::remove_file(&manifest)?;
    if !existed {
        std::fs::remove_dir(dir)?;
    }
    Ok(())
}

pub struct CheckConfig {
    pub steps: usize,
    pub save_at: usize,
    pub global_batch: usize,
    pub dir: std::path::PathBuf,
    /// Largest |w_resumed - w_straight| accepted.
    pub tol: f32,
}

/// Runs steps `from..to` on this rank's shard through the step users run
/// (`step::TrainStep` with `zero1::Zero1Overlap`); the parameters are complete afterwards.
fn train(
    st: &mut TrainStep,
    m: &dyn StagedModel,
    c: &dyn Communicator,
    cfg: &CheckConfig,
    (from, to): (usize, usize),
    dev: &Device,
) -> Result<()> {
    for s in from..to {
        let b = shard_batch(
            &global_batch(s, cfg.global_batch, dev)?,
            c.rank(),
            c.world_size(),
        )?;
        st.step(m, &[b], AdamWConfig::default().lr)?;
    }
    st.flush()?;
    Ok(())
}

/// `z` in the step users run.
fn zero1_step(m: &dyn StagedModel, mut z: Zero1Overlap) -> Result<TrainStep> {
    z.set_gather_ahead(true);
    let cfg = AdamWConfig::default();
    TrainStep::new(m, Box::new(z), cfg, StepOptions::default())
}

fn zero1(st: &mut TrainStep) -> &mut Zero1Overlap {
    st.strategy_as_mut().expect("built with Zero1Overlap")
}

pub fn run_rank(comm: Arc<dyn Communicator>, dev: &Device, cfg: &CheckConfig) -> Result<()> {
    if cfg.save_at == 0 || cfg.save_at >= cfg.steps {
        bail!(
            "--save-at {} must be within 1..{} (--steps)",
            cfg.save_at,
            cfg.steps
        );
    }
    check_tol(cfg.tol)?;
    // Every rank, before any collective: all fail at once on a bad --dir.
    let existed = check_dir(&cfg.dir)?;
    let c = comm.as_ref();
    let (rank, world) = (c.rank(), c.world_size());
    let opt = AdamWConfig::default();
    // Uninterrupted, saving on the way (other seeds per rank: the broadcast is exercised).
    let m = tiny(rank as u64 * 17, dev)?;
    let z = Zero1Overlap::new(
        comm.clone(),
        m.as_ref(),
        Strategy::Bucketed { bucket_mb: 0.05 },
        opt,
    )?;
    let mut st = zero1_step(m.as_ref(), z)?;
    train(&mut st, m.as_ref(), c, cfg, (0, cfg.save_at), dev)?;
    zero1(&mut st).save(&cfg.dir)?;
    train(&mut st, m.as_ref(), c, cfg, (cfg.save_at, cfg.steps), dev)?;
    let straight = weights(m.as_ref())?;
    let layout_a = zero1(&mut st).ddp().buckets().len();
    drop(st);
    // Resumed into a fresh model with another bucket layout.
    let m2 = tiny(1000 + rank as u64, dev)?;
    let z2 = Zero1Overlap::resume(
        comm.clone(),
        m2.as_ref(),
        Strategy::Bucketed { bucket_mb: 1.0 },
        opt,
        &cfg.dir,
    )?;
    let mut st2 = zero1_step(m2.as_ref(), z2)?;
    train(&mut st2, m2.as_ref(), c, cfg, (cfg.save_at, cfg.steps), dev)?;
    let resumed = weights(m2.as_ref())?;
    let layout_b = zero1(&mut st2).ddp().buckets().len();
    // Non-finite weights fail the check (on every rank) instead of comparing as 0.
    let bad = [("straight", &straight), ("resumed", &resumed)]
        .into_iter()
        .find_map(|(what, w)| finite(what, w).err());
    if let Some(e) = &bad {
        eprintln!("zero1-check rank {rank}: {e}");
    }
    let nonfinite = if bad.is_some() { 1f32 } else { 0.0 };
    let (resume_abs, _) = compare(&resumed, &straight).unwrap_or((f32::NAN, f32::NAN));
    // Every rank against rank 0.
    let mut ranks_abs = 0f32;
    for w in &straight {
        let r0 = w.copy()?;
        c.broadcast(&r0, 0)?;
        let d = compare(std::slice::from_ref(w), &[r0]).map_or(f32::NAN, |x| x.0);
        ranks_abs = if d.is_nan() { d } else { ranks_abs.max(d) };
    }
    let (mut single_abs, mut single_ratio) = (0f32, 0f32);
    if rank == 0 {
        let s = tiny(0, dev)?;
        let mut o = TrainStep::new(
            s.as_ref(),
            Box::new(step::Local),
            opt,
            StepOptions::default(),
        )?;
        for step in 0..cfg.steps {
            o.step(
                s.as_ref(),
                &[global_batch(step, cfg.global_batch, dev)?],
                opt.lr,
            )?;
        }
        o.flush()?;
        drop(o);
        (single_abs, single_ratio) =
            compare(&straight, &weights(s.as_ref())?).unwrap_or((f32::NAN, f32::NAN));
    }
    // A NaN is sent as inf (a max over NaN may drop it); the verdict fails on either.
    let nan_to_inf = |x: f32| if x.is_nan() { f32::INFINITY } else { x };
    let mine = [resume_abs, ranks_abs, single_abs, single_ratio, nonfinite].map(nan_to_inf);
    let t = Tensor::new(&mine[..], dev)?;
    c.all_reduce(&t, ReduceOp::Max)?;
    let v: Vec<f32> = t.to_device(&Device::Cpu)?.to_vec1()?;
    let ok = passes(&v, cfg.tol);
    if rank == 0 {
        println!(
            "zero1-check {} world {world}: {} steps, saved after {} ({layout_a} buckets), resumed with {layout_b} buckets: max|w_resumed - w_straight| = {:.3e} (tol {:e}), max|w_rank - w_rank0| = {:.3e}, max|w - w_single| = {:.3e} (worst |diff| / (1e-5 + 1.3e-6|w|) = {:.3}){}: {}",
            c.backend(),
            cfg.steps,
            cfg.save_at,
            v[0],
            cfg.tol,
            v[1],
            v[2],
            v[3],
            if v[4] != 0.0 { ", NaN/inf in the weights" } else { "" },
            if ok { "OK" } else { "FAILED" }
        );
    }
    if !ok {
        bail!(
            "zero1-check failed (see above); the checkpoint is kept in {}",
            cfg.dir.display()
        );
    }
    // Every rank has read the checkpoint (the all-reduce above came after the resume).
    if rank == 0 {
        remove_checkpoint(&cfg.dir, existed)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(v: &[f32]) -> Tensor {
        Tensor::new(v, &Device::Cpu).unwrap()
    }

    #[test]
    fn a_planted_nan_or_inf_fails_the_comparison() {
        let good = [t(&[1.0, 2.0]), t(&[3.0])];
        assert_eq!(compare(&good, &good).unwrap(), (0.0, 0.0));
        for bad in [f32::NAN, f32::INFINITY] {
            let planted = [t(&[1.0, 2.0]), t(&[bad])];
            let e = compare(&planted, &good).unwrap_err().to_string();
            assert!(e.contains("left side: parameter 1 holds"), "{e}");
            let e = compare(&good, &planted).unwrap_err().to_string();
            assert!(e.contains("right side: parameter 1 holds"), "{e}");
        }
    }

    #[test]
    fn the_verdict_fails_on_nan_anywhere() {
        assert!(passes(&[0.0, 0.0, 1e-7, 0.5, 0.0], 1e-6));
        for i in 0..5 {
            let mut v = [0.0, 0.0, 1e-7, 0.5, 0.0];
            v[i] = f32::NAN;
            assert!(!passes(&v, 1e-6), "NaN at {i} passed");
        }
        assert!(
            !passes(&[0.0, 0.0, 0.0, 0.0, 1.0], 1e-6),
            "non-finite weights passed"
        );
        assert!(!passes(&[0.0; 5], f32::NAN));
    }

    #[test]
    fn a_negative_or_nan_tolerance_is_refused_naming_it() {
        for tol in [-1e-6, f32::NAN, f32::INFINITY] {
            let e = check_tol(tol).unwrap_err().to_string();
            assert!(e.starts_with("--tol "), "{e}");
        }
        check_tol(0.0).unwrap();
    }
}

//! `bench zero1-check`: ZeRO-1 checkpoints on the real backend. On every rank, the tiny LM
//! is trained with `Zero1Overlap` (gather-ahead on, small buckets) for `steps` steps on a
//! global batch sharded over the ranks, saving a sharded checkpoint after `save_at` steps;
//! a fresh model (other seed) and optimizer with another bucket layout then resume from
//! that checkpoint and run the remaining steps again. Checked: the resumed weights equal
//! the uninterrupted ones, every rank holds the same weights, and (rank 0) both equal
//! single-process AdamW on the whole batch within atol 1e-5 + rtol 1.3e-6 (the ddp check's
//! rule). Fails (every rank) naming what differs.

use anyhow::{bail, Result};
use candle_core::{Device, Tensor};
use comm::{Communicator, ReduceOp};
use ddp::{check, shard_batch, Strategy};
use model::{AdamW, AdamWConfig, StagedModel};
use std::sync::Arc;
use zero1::Zero1Overlap;

fn tiny(seed: u64, dev: &Device) -> Result<Box<dyn StagedModel>> {
    Ok(check::build("tiny", seed, dev)?)
}

fn global_batch(step: usize, b: usize, dev: &Device) -> Result<model::Batch> {
    Ok(check::global_batch("tiny", step as u64, b, dev)?)
}

fn weights(m: &dyn StagedModel) -> Result<Vec<Tensor>> {
    Ok(m.params()
        .vars()
        .iter()
        .map(|v| v.as_tensor().copy())
        .collect::<candle_core::Result<_>>()?)
}

/// Largest |a - b| and largest |a - b| / (1e-5 + 1.3e-6 |b|) over all tensors.
fn compare(a: &[Tensor], b: &[Tensor]) -> Result<(f32, f32)> {
    let (mut abs, mut ratio) = (0f32, 0f32);
    for (x, y) in a.iter().zip(b) {
        abs = abs.max(check::max_abs_diff(x, y)?);
        ratio = ratio.max(check::worst_ratio(x, y, 1e-5, 1.3e-6)?);
    }
    Ok((abs, ratio))
}

pub struct CheckConfig {
    pub steps: usize,
    pub save_at: usize,
    pub global_batch: usize,
    pub dir: std::path::PathBuf,
}

/// Runs steps `from..to` on this rank's shard.
fn train(
    z: &mut Zero1Overlap,
    m: &dyn StagedModel,
    c: &dyn Communicator,
    cfg: &CheckConfig,
    from: usize,
    to: usize,
    dev: &Device,
) -> Result<()> {
    for s in from..to {
        let b = shard_batch(
            &global_batch(s, cfg.global_batch, dev)?,
            c.rank(),
            c.world_size(),
        )?;
        z.forward_backward(m, &b)?;
        z.step()?;
    }
    z.sync_params()?;
    Ok(())
}

pub fn run_rank(comm: Arc<dyn Communicator>, dev: &Device, cfg: &CheckConfig) -> Result<()> {
    if cfg.save_at == 0 || cfg.save_at >= cfg.steps {
        bail!(
            "--save-at {} must be within 1..{} (--steps)",
            cfg.save_at,
            cfg.steps
        );
    }
    let c = comm.as_ref();
    let (rank, world) = (c.rank(), c.world_size());
    let opt = AdamWConfig::default();
    if rank == 0 && cfg.dir.exists() {
        std::fs::remove_dir_all(&cfg.dir)?;
    }
    c.barrier()?;
    // Uninterrupted, saving on the way (other seeds per rank: the broadcast is exercised).
    let m = tiny(rank as u64 * 17, dev)?;
    let mut z = Zero1Overlap::new(
        comm.clone(),
        m.as_ref(),
        Strategy::Bucketed { bucket_mb: 0.05 },
        opt,
    )?;
    z.set_gather_ahead(true);
    train(&mut z, m.as_ref(), c, cfg, 0, cfg.save_at, dev)?;
    z.save(&cfg.dir)?;
    train(&mut z, m.as_ref(), c, cfg, cfg.save_at, cfg.steps, dev)?;
    let straight = weights(m.as_ref())?;
    let layout_a = z.ddp().buckets().len();
    drop(z);
    // Resumed into a fresh model with another bucket layout.
    let m2 = tiny(1000 + rank as u64, dev)?;
    let mut z2 = Zero1Overlap::resume(
        comm.clone(),
        m2.as_ref(),
        Strategy::Bucketed { bucket_mb: 1.0 },
        opt,
        &cfg.dir,
    )?;
    z2.set_gather_ahead(true);
    train(&mut z2, m2.as_ref(), c, cfg, cfg.save_at, cfg.steps, dev)?;
    let resumed = weights(m2.as_ref())?;
    let layout_b = z2.ddp().buckets().len();
    let (resume_abs, _) = compare(&resumed, &straight)?;
    // Every rank against rank 0.
    let mut ranks_abs = 0f32;
    for w in &straight {
        let r0 = w.copy()?;
        c.broadcast(&r0, 0)?;
        ranks_abs = ranks_abs.max(compare(std::slice::from_ref(w), &[r0])?.0);
    }
    let (mut single_abs, mut single_ratio) = (0f32, 0f32);
    if rank == 0 {
        let s = tiny(0, dev)?;
        let mut o = AdamW::new(opt)?;
        for step in 0..cfg.steps {
            let (_, g) = model::forward_backward(
                s.as_ref(),
                &global_batch(step, cfg.global_batch, dev)?,
                |_, _| Ok(()),
            )?;
            o.step(s.params().vars(), &g)?;
        }
        (single_abs, single_ratio) = compare(&straight, &weights(s.as_ref())?)?;
    }
    let t = Tensor::new(&[resume_abs, ranks_abs, single_abs, single_ratio], dev)?;
    c.all_reduce(&t, ReduceOp::Max)?;
    let v: Vec<f32> = t.to_device(&Device::Cpu)?.to_vec1()?;
    let ok = v[0] <= 1e-6 && v[1] == 0.0 && v[3] <= 1.0;
    if rank == 0 {
        println!(
            "zero1-check {} world {world}: {} steps, saved after {} ({layout_a} buckets), resumed with {layout_b} buckets: max|w_resumed - w_straight| = {:.3e}, max|w_rank - w_rank0| = {:.3e}, max|w - w_single| = {:.3e} (worst |diff| / (1e-5 + 1.3e-6|w|) = {:.3}): {}",
            c.backend(),
            cfg.steps,
            cfg.save_at,
            v[0],
            v[1],
            v[2],
            v[3],
            if ok { "OK" } else { "FAILED" }
        );
    }
    if !ok {
        bail!("zero1-check failed (see above)");
    }
    Ok(())
}

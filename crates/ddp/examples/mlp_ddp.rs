//! A user-defined candle-nn model trained with DDP: a 3-layer MLP (Linear, GELU,
//! cross-entropy) on 2 and 4 in-process CPU ranks, checked against single-process
//! training on the whole batch (weights within 1e-5, identical on every rank).
//!
//!   cargo run -p ddp --example mlp_ddp

use anyhow::{ensure, Result};
use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{linear, loss::cross_entropy, Linear, VarBuilder, VarMap};
use ddp::{shard_batch, Ddp, DdpOptions, Strategy};
use seam::{AdamW, AdamWConfig, Batch, ParamSet, Sequential, StagedModel};
use std::sync::Arc;

const STEPS: u64 = 5;

// Plain candle-nn: the layers and the loss.
fn layers(vb: VarBuilder) -> candle_core::Result<(Linear, Linear, Linear)> {
    Ok((
        linear(16, 32, vb.pp("l1"))?,
        linear(32, 32, vb.pp("l2"))?,
        linear(32, 4, vb.pp("l3"))?,
    ))
}
fn loss(logits: &Tensor, batch: &Batch) -> candle_core::Result<Tensor> {
    cross_entropy(logits, &batch.targets)
}

// The adapter: the layers as stages, their parameters by name prefix, the loss outside.
fn mlp() -> seam::Result<Sequential> {
    let varmap = VarMap::new();
    let (l1, l2, l3) = layers(VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu))?;
    Sequential::builder(ParamSet::from_varmap(&varmap)?)
        .stage("l1", move |x: &Tensor| l1.forward(x)?.gelu())
        .stage("l2", move |x: &Tensor| l2.forward(x)?.gelu())
        .stage("l3", l3)
        .loss(loss)
}

/// Step `step`'s global batch: 8 rows of 16 features, 4 classes (the same on every rank).
fn batch(step: u64) -> Result<Batch> {
    let h = |i: u64| ((i * 2654435761 + step * 1_000_003) % 10_007) as f32 / 5_003.5 - 1.0;
    let x: Vec<f32> = (0..8 * 16).map(h).collect();
    let y: Vec<u32> = (0..8).map(|i| (i * 7 + step as u32) % 4).collect();
    let dev = Device::Cpu;
    Ok(Batch::new(
        Tensor::from_vec(x, (8, 16), &dev)?,
        Tensor::from_vec(y, 8, &dev)?,
    ))
}

fn weights(m: &Sequential) -> Result<Vec<f32>> {
    let mut w = Vec::new();
    for v in m.params().vars() {
        w.extend(v.as_tensor().flatten_all()?.to_vec1::<f32>()?);
    }
    Ok(w)
}

/// One rank: its own model (candle-nn draws other weights; Ddp::new broadcasts rank 0's).
fn train_rank(comm: Arc<dyn comm::Communicator>, init: &[Tensor]) -> Result<Vec<f32>> {
    let (rank, world) = (comm.rank(), comm.world_size());
    let m = mlp()?;
    if rank == 0 {
        for (v, t) in m.params().vars().iter().zip(init) {
            v.set(t)?;
        }
    }
    let mut ddp = Ddp::new(
        comm,
        &m,
        DdpOptions::new(Strategy::Bucketed { bucket_mb: 25.0 }),
    )?;
    let mut opt = AdamW::new(AdamWConfig::default())?;
    for step in 0..STEPS {
        ddp.forward_backward(&m, &shard_batch(&batch(step)?, rank, world)?)?;
        opt.step(m.params().vars(), &ddp.finish_gradient_synchronization()?)?;
    }
    weights(&m)
}

/// The reference: one process, the whole batch, the same initial weights.
fn train_single(init: &[Tensor]) -> Result<Vec<f32>> {
    let m = mlp()?;
    for (v, t) in m.params().vars().iter().zip(init) {
        v.set(t)?;
    }
    let mut opt = AdamW::new(AdamWConfig::default())?;
    for step in 0..STEPS {
        let (_, grads) = seam::forward_backward(&m, &batch(step)?, |_, _| Ok(()))?;
        opt.step(m.params().vars(), &grads)?;
    }
    weights(&m)
}

fn main() -> Result<()> {
    let init: Vec<Tensor> = mlp()?
        .params()
        .vars()
        .iter()
        .map(|v| v.as_tensor().copy())
        .collect::<candle_core::Result<_>>()?;
    let single = train_single(&init)?;
    let before: Vec<f32> = init
        .iter()
        .map(|t| t.flatten_all()?.to_vec1::<f32>())
        .collect::<candle_core::Result<Vec<_>>>()?
        .concat();
    for world in [2, 4] {
        let comms = comm::cpu_group(world, comm::CommOptions::default())?;
        let ranks: Vec<Result<Vec<f32>>> = std::thread::scope(|s| {
            let handles: Vec<_> = comms
                .into_iter()
                .map(|c| s.spawn(|| train_rank(Arc::new(c), &init)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow::anyhow!("a rank panicked")))
                })
                .collect()
        });
        let ranks = ranks.into_iter().collect::<Result<Vec<_>>>()?;
        let diff = ranks[0]
            .iter()
            .zip(&single)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        let moved = before
            .iter()
            .zip(&single)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        ensure!(
            ranks.iter().all(|w| w == &ranks[0]),
            "world {world}: the ranks' weights differ"
        );
        ensure!(
            diff <= 1e-5,
            "world {world}: DDP differs from single-process training by {diff}"
        );
        ensure!(moved > 1e-3, "training moved nothing");
        println!("mlp_ddp: {world} ranks, {STEPS} steps: max |w_ddp - w_single| = {diff:.1e} (weights moved {moved:.1e}), ranks identical");
    }
    Ok(())
}

//! Shared by the ddp tests: models, batches, single-process reference training, and
//! running one closure per rank on the CPU backend.

#![allow(dead_code)]

pub mod reference_step;

use candle_core::{Device, Tensor};
use model::{AdamW, AdamWConfig, Batch, LmConfig, StagedModel, ToyModel, TransformerLm};
use rand::{Rng, SeedableRng};
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    Toy,
    Lm,
    /// The ToyModel with 7001 inputs: its first layer's gradient (70,010 elements) is
    /// large enough for DDP to reduce it in place (`ddp`'s `IN_PLACE_MIN`), and ZeRO-1
    /// shards it in place on 2 ranks but not on 4 (70,010 = 2 × 35,005).
    Wide,
}

/// The inputs of the ToyModel kinds.
fn toy_inputs(kind: Kind) -> usize {
    match kind {
        Kind::Wide => 7001,
        _ => 6,
    }
}

pub fn build(kind: Kind, seed: u64) -> Box<dyn StagedModel + Send> {
    let dev = Device::Cpu;
    match kind {
        Kind::Toy | Kind::Wide => Box::new(ToyModel::new(toy_inputs(kind), 5, seed, &dev).unwrap()),
        Kind::Lm => Box::new(TransformerLm::new(LmConfig::tiny(64), seed, &dev).unwrap()),
    }
}

/// The global batch of step `step`: 8 rows.
pub fn global_batch(kind: Kind, step: u64) -> Batch {
    let dev = Device::Cpu;
    let mut r = rand::rngs::StdRng::seed_from_u64(1000 + step);
    match kind {
        Kind::Toy | Kind::Wide => {
            let n = toy_inputs(kind);
            let x: Vec<f32> = (0..8 * n).map(|_| r.random_range(-1.0..1.0)).collect();
            let y: Vec<u32> = (0..8).map(|_| r.random_range(0..5)).collect();
            Batch::new(
                Tensor::from_vec(x, (8, n), &dev).unwrap(),
                Tensor::from_vec(y, 8, &dev).unwrap(),
            )
        }
        Kind::Lm => {
            let ids: Vec<u32> = (0..8 * 16).map(|_| r.random_range(0..64)).collect();
            let tg: Vec<u32> = (0..8 * 16).map(|_| r.random_range(0..64)).collect();
            Batch::new(
                Tensor::from_vec(ids, (8, 16), &dev).unwrap(),
                Tensor::from_vec(tg, (8, 16), &dev).unwrap(),
            )
        }
    }
}

pub fn weights(m: &dyn StagedModel) -> Vec<Vec<f32>> {
    m.params()
        .vars()
        .iter()
        .map(|v| v.as_tensor().flatten_all().unwrap().to_vec1().unwrap())
        .collect()
}

/// max |a - b| over all weights; +inf where either is NaN or infinite (a diverged run
/// never passes): `ddp::check::max_abs_diff_host`.
pub fn max_diff(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    ddp::check::max_abs_diff_host(a, b).unwrap()
}

/// Single-process AdamW training on the whole global batch; with `micro` > 1 each step
/// averages the gradients of `micro` consecutive global batches (gradient accumulation,
/// as Ddp does by default).
pub fn reference(kind: Kind, steps: u64, micro: u64) -> Vec<Vec<f32>> {
    let m = build(kind, 0);
    let mut opt = AdamW::new(AdamWConfig::default()).unwrap();
    for s in 0..steps {
        let mut total: Option<model::Grads> = None;
        for k in 0..micro {
            let (_, g) =
                model::forward_backward(m.as_ref(), &global_batch(kind, s * micro + k), |_, _| {
                    Ok(())
                })
                .unwrap();
            total = Some(match total {
                None => g,
                Some(t) => t
                    .into_iter()
                    .zip(g)
                    .map(|(a, b)| Some((a.unwrap() + b.unwrap()).unwrap()))
                    .collect(),
            });
        }
        let mean: model::Grads = total
            .unwrap()
            .into_iter()
            .map(|g| g.map(|g| (g / micro as f64).unwrap()))
            .collect();
        opt.step(m.params().vars(), &mean).unwrap();
    }
    weights(m.as_ref())
}

/// Runs `f(rank, comm)` on `world` threads over one CPU group; returns the results by rank.
pub fn on_ranks<T: Send + 'static>(
    world: usize,
    f: impl Fn(usize, Arc<dyn comm::Communicator>) -> T + Send + Sync + 'static,
) -> Vec<T> {
    let f = Arc::new(f);
    let comms = comm::cpu_group(world, comm::CommOptions::default()).unwrap();
    let handles: Vec<_> = comms
        .into_iter()
        .enumerate()
        .map(|(r, c)| {
            let f = f.clone();
            std::thread::spawn(move || f(r, Arc::new(c) as Arc<dyn comm::Communicator>))
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

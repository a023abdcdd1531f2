//! The models and batches of the data-parallel correctness checks, by name (`bench
//! ddp-check`, `bench zero1-check`): "toy", "tiny" or an LM size, and a global batch that
//! is a function of the step only, so every rank and the single-process reference see the
//! same data.

use crate::{Batch, LmConfig, StagedModel, ToyModel, TransformerLm};
use candle_core::{Device, Tensor};

/// The LM configuration `name` builds (`None` for "toy").
pub fn lm_config(name: &str) -> crate::Result<Option<LmConfig>> {
    Ok(match name {
        "toy" => None,
        "tiny" => Some(LmConfig::tiny(crate::VOCAB)),
        s => Some(LmConfig::by_name(s)?),
    })
}

/// "toy", "tiny", or an LM size (small, medium, large, xl, 2.7B, 6.7B, 13B), from `seed`.
pub fn build(name: &str, seed: u64, dev: &Device) -> crate::Result<Box<dyn StagedModel>> {
    Ok(match name {
        "toy" => Box::new(ToyModel::new(16, 8, seed, dev)?),
        "tiny" => Box::new(TransformerLm::new(LmConfig::tiny(crate::VOCAB), seed, dev)?),
        s => Box::new(TransformerLm::new(LmConfig::by_name(s)?, seed, dev)?),
    })
}

/// `b` sequences (rows for "toy") of step `step`'s global batch for model `name`.
pub fn global_batch(name: &str, step: u64, b: usize, dev: &Device) -> crate::Result<Batch> {
    let h = |i: usize, k: u64| {
        (i as u64)
            .wrapping_mul(2654435761)
            .wrapping_add(step * 1_000_003 + k)
            % 1_000_003
    };
    Ok(if name == "toy" {
        let x: Vec<f32> = (0..b * 16)
            .map(|i| h(i, 1) as f32 / 500_000.0 - 1.0)
            .collect();
        let y: Vec<u32> = (0..b).map(|i| (h(i, 2) % 8) as u32).collect();
        Batch::new(
            Tensor::from_vec(x, (b, 16), dev)?,
            Tensor::from_vec(y, b, dev)?,
        )
    } else {
        let t = if name == "tiny" { 32 } else { crate::CONTEXT };
        let v = crate::VOCAB as u64;
        let ids: Vec<u32> = (0..b * t).map(|i| (h(i, 3) % v) as u32).collect();
        let tg: Vec<u32> = (0..b * t).map(|i| (h(i, 4) % v) as u32).collect();
        Batch::new(
            Tensor::from_vec(ids, (b, t), dev)?,
            Tensor::from_vec(tg, (b, t), dev)?,
        )
    })
}

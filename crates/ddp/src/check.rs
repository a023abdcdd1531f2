//! What the data-parallel correctness checks share (`ddp-train --check`, `bench
//! zero1-check`): the models by name, a global batch that is a function of the step only
//! (so every rank and the single-process reference see the same data), and the weight
//! comparisons (torch.testing.assert_close's rule).

use crate::Result;
use candle_core::{DType, Device, Tensor};
use model::{Batch, LmConfig, StagedModel, ToyModel, TransformerLm};

/// "toy", "tiny", or an LM size (small, medium, large, xl, 2.7B), from `seed`.
pub fn build(name: &str, seed: u64, dev: &Device) -> model::Result<Box<dyn StagedModel>> {
    Ok(match name {
        "toy" => Box::new(ToyModel::new(16, 8, seed, dev)?),
        "tiny" => Box::new(TransformerLm::new(LmConfig::tiny(model::VOCAB), seed, dev)?),
        s => Box::new(TransformerLm::new(LmConfig::by_name(s)?, seed, dev)?),
    })
}

/// `b` sequences (rows for "toy") of step `step`'s global batch for model `name`.
pub fn global_batch(name: &str, step: u64, b: usize, dev: &Device) -> Result<Batch> {
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
        Batch {
            input: Tensor::from_vec(x, (b, 16), dev)?,
            targets: Tensor::from_vec(y, b, dev)?,
        }
    } else {
        let t = if name == "tiny" { 32 } else { model::CONTEXT };
        let v = model::VOCAB as u64;
        let ids: Vec<u32> = (0..b * t).map(|i| (h(i, 3) % v) as u32).collect();
        let tg: Vec<u32> = (0..b * t).map(|i| (h(i, 4) % v) as u32).collect();
        Batch {
            input: Tensor::from_vec(ids, (b, t), dev)?,
            targets: Tensor::from_vec(tg, (b, t), dev)?,
        }
    })
}

/// Largest |a - b|.
pub fn max_abs_diff(a: &Tensor, b: &Tensor) -> Result<f32> {
    let (a, b) = (a.to_dtype(DType::F32)?, b.to_dtype(DType::F32)?);
    Ok((a - b)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?)
}

/// Largest |a - b| / (tol + rtol * |b|): at most 1 when `a` is close to `b`.
pub fn worst_ratio(a: &Tensor, b: &Tensor, tol: f32, rtol: f32) -> Result<f32> {
    let (a, b) = (&a.to_dtype(DType::F32)?, &b.to_dtype(DType::F32)?);
    let allowed = ((b.abs()? * rtol as f64)? + tol as f64)?;
    Ok(((a - b)?.abs()? / allowed)?
        .flatten_all()?
        .max(0)?
        .to_scalar::<f32>()?)
}

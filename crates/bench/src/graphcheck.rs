//! `bench model-check`'s CUDA-graph check: ten AdamW steps of the tiny LM, each on its own
//! batch, eager against one eager step and nine replays of the captured whole step
//! (forward, backward, AdamW; each batch copied into the captured step's static input
//! tensors first, AdamW's step scalars advanced before each replay).
//! The weights must agree within 1e-6 relative (fp32); bf16 within 1e-2. The device must
//! not track per-allocation events (comm's `cuda_device`), as for every captured step.
//! The graphed run's AdamW runs where `--adamw` puts it (after the backward, inside it, or
//! inside it on a second stream); the eager reference's always after it.

use crate::adamw_place::{backward, AdamwOpts, AdamwPlace};
use anyhow::{bail, Result};
use candle_core::{DType, Device, Tensor};
use model::graph::{capture, HtodCache};
use model::{forward_backward, AdamW, AdamWConfig, Batch, LmConfig, StagedModel, TransformerLm};

const STEPS: u32 = 10;

fn lm(dev: &Device, dtype: DType) -> Result<TransformerLm> {
    let mut lm = TransformerLm::new(LmConfig::tiny(512), 42, dev)?;
    lm.set_compute_dtype(dtype);
    Ok(lm)
}

/// Step `s`'s batch: 4 sequences of 32 tokens, different every step.
fn batch(lm: &TransformerLm, s: u32, dev: &Device) -> Result<Batch> {
    let ids: Vec<u32> = (0..4 * 32).map(|i| (i * 37 + s * 101) % 512).collect();
    let tg: Vec<u32> = (0..4 * 32).map(|i| (i * 91 + s * 53) % 512).collect();
    Ok(Batch::new(
        lm.tokens(&ids, 4, dev)?,
        lm.tokens(&tg, 4, dev)?,
    ))
}

fn adamw() -> Result<AdamW> {
    Ok(AdamW::new(AdamWConfig {
        lr: 1e-3,
        ..AdamWConfig::default()
    })?)
}

/// Worst over parameters of max|w_graph − w_eager| / max|w_eager| after ten steps; an
/// error when capture fails (with its reason) or past the tolerance.
pub fn graph_vs_eager(gpu: &Device, dtype: DType, place: AdamwPlace) -> Result<f32> {
    // A second stream with the update kernels' full grid and the default lag.
    let opts = AdamwOpts {
        place,
        side_blocks: 0,
        side_lag: model::in_backward::LAG,
    };
    let side = opts.side(place, gpu)?;
    let _cache = HtodCache::enable(gpu);
    let eager = lm(gpu, dtype)?;
    let mut opt = adamw()?;
    for s in 0..STEPS {
        let (_, g) = forward_backward(&eager, &batch(&eager, s, gpu)?, |_, _| Ok(()))?;
        opt.step(eager.params().vars(), &g)?;
    }
    // The eager run above loaded every kernel and cached every layout upload; the graph
    // model's first step is eager too (AdamW's moments and scalars must exist before a
    // capture), then the whole step is captured and replayed: forward, backward, AdamW.
    let graphed = lm(gpu, dtype)?;
    let input = batch(&graphed, 0, gpu)?;
    let mut opt = adamw()?;
    let step = |opt: &mut AdamW| -> model::Result<Tensor> {
        let tape = model::forward(&graphed, &input)?;
        let loss = tape.loss().clone();
        if let Some(g) = backward(&graphed, tape, opt, place, side.as_ref())? {
            opt.step_params(graphed.params(), &g)?;
        }
        Ok(loss)
    };
    step(&mut opt)?;
    let mut captured = None;
    for s in 1..STEPS {
        let b = batch(&graphed, s, gpu)?;
        input.input.slice_set(&b.input, 0, 0)?;
        input.targets.slice_set(&b.targets, 0, 0)?;
        if s == 1 {
            captured = Some(
                capture(gpu, || step(&mut opt))
                    .map_err(|why| anyhow::anyhow!("{dtype:?}: capture failed: {why}"))?,
            );
        } else {
            opt.advance_for_replay()?;
        }
        if let Some(c) = &captured {
            c.replay()?;
        }
    }
    let tol = if dtype == DType::F32 { 1e-6 } else { 1e-2 };
    let mut worst = 0f32;
    let names = eager.params().names();
    for (i, (a, b)) in eager
        .params()
        .vars()
        .iter()
        .zip(graphed.params().vars())
        .enumerate()
    {
        let (a, b) = (a.as_tensor(), b.as_tensor());
        let scale = a
            .abs()?
            .flatten_all()?
            .max(0)?
            .to_scalar::<f32>()?
            .max(1e-12);
        let d = ddp::check::max_abs_diff(a, b)? / scale;
        worst = worst.max(d);
        // max_abs_diff is +inf for a NaN or inf anywhere, so this fails on those too.
        if d.is_nan() || d > tol {
            bail!(
                "{dtype:?}: after {STEPS} steps {} differs by {d:.2e} (relative) > {tol:.0e}",
                names[i]
            );
        }
    }
    Ok(worst)
}

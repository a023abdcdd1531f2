//! The one timing loop for `step::TrainStep` (bench single's step mode, the DDP and ZeRO
//! benchmarks; [`time_local`]: their own 1-GPU step):
//! steps queued back to back as a training loop queues them, each timed by the step itself
//! (`StepOut::seconds`: CUDA events after each step, as `train`'s log), the loss read one
//! step late as `train` reads it.

use crate::memory;
use crate::telemetry::{GpuTelemetry, Sampler};
use anyhow::{Context, Result};
use candle_core::Device;
use seam::{Batch, StagedModel};
use step::{StepOptions, TrainStep};

/// What timing a step gave.
pub struct StepRun {
    /// Each timed step's milliseconds.
    pub ms: Vec<f64>,
    /// The losses of the timed steps.
    pub losses: Vec<f32>,
    pub telemetry: Option<GpuTelemetry>,
    /// Peak device memory of the timed steps (a captured graph's own pool included).
    pub peak_bytes: Option<u64>,
}

/// Runs `warmup` (at least 2: one eager step, then the capture and its first replay, whose
/// launch uploads the graph) untimed steps of `st` on `micro` at `lr`, then `steps` timed.
pub fn time_steps(
    st: &mut TrainStep,
    model: &dyn StagedModel,
    micro: &[Batch],
    lr: f64,
    (warmup, steps): (usize, usize),
    device: &Device,
) -> Result<StepRun> {
    let warmup = warmup.max(2);
    let mut losses = Vec::new();
    let mut ms = Vec::new();
    let mut sampler = None;
    seam::graph::reset_mem_high(device);
    // Step `warmup` is run but not timed: its time holds the flush before it. Its values
    // come back from step warmup + 1.
    let mut keep = |out: step::StepOut| -> Result<()> {
        let s = out.seconds.context("a step after the first is timed")?;
        ms.push(s * 1e3);
        losses.push(out.loss as f32);
        Ok(())
    };
    for i in 0..=warmup + steps {
        if i == warmup {
            st.flush()?;
            memory::reset_peak(device);
            sampler = Sampler::start(device);
        }
        if let Some(out) = st.step(model, micro, lr)? {
            if i > warmup + 1 {
                keep(out)?;
            }
        }
    }
    if let Some(out) = st.flush()? {
        keep(out)?;
    }
    let telemetry = sampler.and_then(Sampler::stop);
    let graph_pool = st
        .graph_status()
        .ok()
        .and(seam::graph::mem_high(device))
        .unwrap_or(0);
    Ok(StepRun {
        ms,
        losses,
        telemetry,
        peak_bytes: memory::peak(device).map(|p| p + graph_pool),
    })
}

/// This GPU alone on `model`: `bench single`'s step (`step::Local` with `opts`, AdamW of
/// `cfg`), timed by [`time_steps`]; the DDP and ZeRO benchmarks' own 1-GPU column.
pub fn time_local(
    model: &dyn StagedModel,
    micro: &[Batch],
    (cfg, opts, lr): (seam::AdamWConfig, StepOptions, f64),
    counts: (usize, usize),
    device: &Device,
) -> Result<StepRun> {
    let mut st = TrainStep::new(model, Box::new(step::Local), cfg, opts)?;
    time_steps(&mut st, model, micro, lr, counts, device)
}

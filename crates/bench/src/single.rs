//! The single-GPU training-step benchmark (the seeds' benchmarking_script, mixed precision
//! and memory profiling): forward, backward and AdamW timed separately with CUDA events,
//! mean and standard deviation over `steps` after `warmup`, tokens/s, model FLOP
//! utilisation, and peak memory for forward-only and for a whole step.

use crate::memory;
pub use crate::single_record::{header, row, Mode, Precision, SingleRecord};
use crate::telemetry::Sampler;
use crate::timer::{mean_std, Timer};
use anyhow::{bail, Result};
use candle_core::{DType, Device, Tensor};
use model::{Batch, LmConfig, StagedModel, TransformerLm};
pub use step::AdamwPlace;

/// Training FLOPs of one step of `batch` windows of `seq` tokens
/// (`memplan::Shape::flops_per_token`, which `train`'s MFU takes too).
pub fn step_flops(cfg: &LmConfig, batch: usize, seq: usize) -> f64 {
    let shape = model::plan::Shape {
        context: seq,
        ..cfg.shape()
    };
    shape.flops_per_token() * (batch * seq) as f64
}

/// The LM of `size` in `dtype` on `device` (with `vocab` tokens where given, else the
/// size's) and the benchmarks' fixed batch (token ids from a multiplicative hash) of
/// `batch` rows on `batch_dev`.
pub fn setup(
    size: &str,
    dtype: Precision,
    batch: usize,
    device: &Device,
    batch_dev: &Device,
    vocab: Option<usize>,
) -> Result<(LmConfig, TransformerLm, Batch)> {
    let cfg = crate::ddp::config_vocab(size, vocab)?;
    let seq = cfg.context;
    let mut lm = TransformerLm::new(cfg.clone(), 0, device)?;
    if dtype == Precision::Bf16 {
        lm.set_compute_dtype(DType::BF16);
    }
    let ids = |s: u64| -> Result<Tensor> {
        let v: Vec<u32> = (0..batch * seq)
            .map(|i| ((i as u64 * 2654435761 + s) % cfg.vocab as u64) as u32)
            .collect();
        Ok(Tensor::from_vec(v, (batch, seq), batch_dev)?)
    };
    let b = Batch::new(ids(1)?, ids(7)?);
    Ok((cfg, lm, b))
}

#[allow(clippy::too_many_arguments)]
pub fn run(
    size: &str,
    dtype: Precision,
    mode: Mode,
    warmup: usize,
    steps: usize,
    batch: usize,
    device: &Device,
    peak_tflops: Option<f64>,
    graph: bool,
    vocab: Option<usize>,
) -> Result<SingleRecord> {
    if mode == Mode::Step {
        bail!("bench single: step mode runs the training step (single_step)");
    }
    if steps == 0 {
        bail!("--steps must be at least 1");
    }
    let (cfg, lm, b) = setup(size, dtype, batch, device, device, vocab)?;
    let seq = cfg.context;
    let (mut fwd, mut bwd, mut optt, mut total) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut loss_first, mut loss_last) = (f32::NAN, f32::NAN);
    let (mut peak_fwd, mut peak_step) = (None, None);
    let mut sampler = None;
    // Graph mode: forward and backward captured after the first (eager) warm-up step, with
    // candle's upload cache on from the first step so the capture finds every layout array
    // on the device.
    let graph = graph && device.is_cuda() && mode != Mode::Fwd;
    // One eager step before the capture, then at least one untimed replay: the first
    // launch of a graph uploads it and maps its memory.
    let warmup = if graph { warmup.max(2) } else { warmup };
    let _cache = graph.then(|| model::graph::HtodCache::enable(device));
    let mut captured: Option<model::graph::CapturedStep<Tensor>> = None;
    let mut fallback = None;
    let mut graph_kernels = None;
    // Forward and backward alone: no AdamW writes the bf16 weight copies, so they are
    // written here once and offered again before every step (the masters never change).
    // Otherwise every forward would cast every weight (about 3 ms of xl at batch 32), work
    // a training step leaves to AdamW.
    let reuse_copies = mode == Mode::FwdBwd;
    if reuse_copies {
        let p = lm.params();
        let masters: Vec<&Tensor> = (0..p.len()).map(|i| p.var(i).as_tensor()).collect();
        p.bf16_shadows().write_all(&masters)?;
    }
    for i in 0..warmup + steps {
        let timed = i >= warmup;
        if reuse_copies {
            lm.params().bf16_shadows().reuse();
        }
        // Not step::TrainStep (its --mode step is, single_step.rs): the forward alone or the
        // forward and backward without an update, parts a step does not expose.
        if graph && i == 1 {
            model::graph::reset_mem_high(device);
            match model::graph::capture(device, || {
                let tape = model::forward(&lm, &b)?;
                let loss = tape.loss().clone();
                tape.backward(|_, _| Ok::<(), model::ModelError>(()))?;
                Ok(loss)
            }) {
                Ok(c) => {
                    if let Some(k) = c.kernel_nodes()? {
                        eprintln!("bench single {size} {}: graph of {k} kernels", dtype.name());
                        graph_kernels = Some(k);
                    }
                    captured = Some(c);
                }
                Err(why) => {
                    eprintln!(
                        "bench single {size} {}: no CUDA graph, eager steps: {why}",
                        dtype.name()
                    );
                    fallback = Some(why);
                }
            }
        }
        if i == warmup {
            memory::reset_peak(device);
            sampler = Sampler::start(device);
        }
        let (tf, tb, to, l) = if let Some(c) = &captured {
            // The replay is the whole step: its time goes in `fwd_ms`.
            let t0 = Timer::start(device)?;
            c.replay()?;
            let tf = t0.stop()?;
            (tf, 0.0, 0.0, c.outputs().to_scalar::<f32>()?)
        } else {
            let t0 = Timer::start(device)?;
            // The staged path training uses (hand-written blocks, fused kernels).
            let tape = model::forward(&lm, &b)?;
            let loss = tape.loss().clone();
            let tf = t0.stop()?;
            if i == warmup {
                peak_fwd = memory::peak(device);
            }
            let (mut tb, to) = (0.0, 0.0);
            if mode == Mode::Fwd {
                drop(tape);
            } else {
                let t1 = Timer::start(device)?;
                tape.backward(|_, _| Ok::<(), model::ModelError>(()))?;
                tb = t1.stop()?;
            }
            (tf, tb, to, loss.to_scalar::<f32>()?)
        };
        if timed {
            if i == warmup {
                loss_first = l;
                // Graph memory is its own pool: the step's peak is both.
                peak_step = memory::peak(device).map(|p| {
                    p + captured
                        .as_ref()
                        .and(model::graph::mem_high(device))
                        .unwrap_or(0)
                });
            }
            loss_last = l;
            fwd.push(tf * 1e3);
            bwd.push(tb * 1e3);
            optt.push(to * 1e3);
            total.push((tf + tb + to) * 1e3);
        }
    }
    drop(captured);
    model::graph::trim(device);
    report_gemm_tuning(size, dtype);
    let gpu = sampler.and_then(Sampler::stop);
    let step_ms = mean_std(&total);
    let flops = match mode {
        Mode::Fwd => step_flops(&cfg, batch, seq) / 3.0,
        _ => step_flops(&cfg, batch, seq),
    };
    Ok(SingleRecord {
        bench: "single".into(),
        size: size.into(),
        dtype,
        mode,
        params: cfg.param_count(),
        vocab: cfg.vocab,
        batch,
        seq,
        steps,
        fwd_ms: mean_std(&fwd),
        bwd_ms: mean_std(&bwd),
        opt_ms: mean_std(&optt),
        step_ms,
        step_median_ms: Some(crate::timer::median(&total)),
        tokens_per_s: (batch * seq) as f64 / (step_ms.0 / 1e3),
        mfu: peak_tflops.map(|p| flops / (step_ms.0 / 1e3) / (p * 1e12)),
        peak_fwd_gib: memory::gib(peak_fwd),
        peak_step_gib: memory::gib(peak_step),
        loss_first,
        loss_last,
        tf32: model::tf32::tf32(),
        graph: graph && fallback.is_none(),
        graph_fallback: fallback,
        graph_kernels,
        adamw: AdamwPlace::After,
        norm: None,
        side_blocks: None,
        side_lag: None,
        gpu,
    })
}

/// The block GEMMs' tuning so far (CUDA): per shape, cuBLASLt's first heuristic against the
/// algorithm chosen, on stderr.
fn report_gemm_tuning(size: &str, dtype: Precision) {
    let t = model::gemm::tuned();
    if t.is_empty() {
        return;
    }
    let (first, best): (f64, f64) = t
        .iter()
        .filter(|g| g.candidates > 1)
        .fold((0.0, 0.0), |(f, b), g| (f + g.first_us, b + g.best_us));
    eprintln!(
        "bench single {size} {}: {} GEMM shapes tuned so far, first heuristic {first:.0} us -> chosen {best:.0} us (one call each)",
        dtype.name(),
        t.len()
    );
    for g in &t {
        eprintln!(
            "  gemm {:>5} x {:>5} x {:>5} {:>4}{} candidates {:>2}: {:>8.1} -> {:>8.1} us",
            g.m,
            g.n,
            g.k,
            g.dtype,
            if g.add { " +c" } else { "   " },
            g.candidates,
            g.first_us,
            g.best_us
        );
    }
}

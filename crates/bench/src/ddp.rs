//! The DDP benchmark (the seeds' naive / flat / overlap / bucketed DDP benchmarking): per
//! model size, precision and strategy, on every rank of a launched group, every step the
//! one users run (`step::TrainStep`, timed by [`crate::step_timing`]):
//!   - `single_ms`: this GPU alone, `bench single`'s step (the "own 1-GPU step": one CUDA
//!     graph, AdamW where it runs fastest);
//!   - `compute_ms`: the DDP step's compute without communication. DDP runs AdamW where
//!     one GPU does (inside the backward without clipping: each bucket's update once its
//!     all-reduce is collected; after the norm with clipping), so this is `single_ms`;
//!   - `step_ms`: the DDP step (`ddp::Ddp` as the strategy: forward, staged backward with the strategy's
//!     collectives, AdamW; one CUDA graph with its collectives on NCCL);
//!   - `comm_ms`: the strategy's collectives alone on the same gradients;
//!   - `exposed_ms` = step − compute: communication not hidden by compute.
//!
//! Times are CUDA-event (compute stream) means over `steps`, slowest rank; batch is per rank.

use crate::memory;
use crate::single::Precision;
use crate::step_timing::{time_local, time_steps};
use crate::timer::{mean_std, timed};
use anyhow::{bail, Result};
use candle_core::{DType, Device, Tensor};
use comm::{Communicator, NcclComm, ReduceOp};
use ddp::{Ddp, DdpOptions, Strategy};
use model::{AdamWConfig, Batch, LmConfig, StagedModel, TransformerLm};
use std::path::PathBuf;
use step::{StepOptions, TrainStep};

pub use crate::ddp_record::{header, row, DdpRecord};
use std::sync::Arc;

pub struct DdpBenchConfig {
    pub sizes: Vec<String>,
    pub dtypes: Vec<Precision>,
    pub strategies: Vec<Strategy>,
    pub warmup: usize,
    pub steps: usize,
    pub batch: usize,
    /// The dtype gradients are communicated in.
    pub grads: GradComm,
    /// One run per value: SMs the backward's GEMMs leave to NCCL ([`DdpOptions`]).
    pub sm_carveouts: Vec<usize>,
    /// One run per value: coalesced launches ([`DdpOptions::coalesce`]).
    pub coalesce: Vec<bool>,
    /// Where rank 0 writes one Chrome trace per (size, dtype, strategy); NCCL only.
    pub trace_dir: Option<PathBuf>,
    /// Capture each step as a CUDA graph (`TrainStep`'s), and the clipping norm (0: off).
    pub graph: bool,
    pub clip: f64,
}

/// The dtype gradients are communicated in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GradComm {
    /// The model's compute dtype (bf16 gradients for a bf16 model).
    Auto,
    /// Always f32 (as PyTorch autocast does).
    Fp32,
    /// Always bf16, an fp32 model too (PyTorch DDP's `bf16_compress_hook`).
    Bf16,
}

impl GradComm {
    fn dtype(self, prec: Precision) -> Option<DType> {
        match (self, prec) {
            (GradComm::Bf16, _) | (GradComm::Auto, Precision::Bf16) => Some(DType::BF16),
            _ => None,
        }
    }
}

/// The strategies the seeds benchmark: naive, flat, overlap, and bucketed per size.
pub fn strategies(names: &[String], buckets_mb: &[f64]) -> Result<Vec<Strategy>> {
    let mut out = Vec::new();
    for n in names {
        if n == "bucketed" {
            out.extend(
                buckets_mb
                    .iter()
                    .map(|&b| Strategy::Bucketed { bucket_mb: b }),
            );
        } else {
            out.push(n.parse::<Strategy>()?);
        }
    }
    if out.is_empty() {
        bail!("no strategy to run (--strategies is empty)");
    }
    Ok(out)
}

/// Slowest rank's values.
fn max_over_ranks(comm: &dyn Communicator, dev: &Device, v: &[f64]) -> Result<Vec<f64>> {
    let t = Tensor::new(v, dev)?;
    comm.all_reduce(&t, ReduceOp::Max)?;
    Ok(t.to_device(&Device::Cpu)?.to_vec1()?)
}

pub(crate) fn batch_for(lm: &TransformerLm, rank: usize, b: usize, dev: &Device) -> Result<Batch> {
    let (v, t) = (lm.config().vocab as u64, lm.config().context);
    let ids = |s: u64| -> Result<Tensor> {
        let x: Vec<u32> = (0..b * t)
            .map(|i| ((i as u64 * 2654435761 + s * 97 + rank as u64 * 7919) % v) as u32)
            .collect();
        Ok(lm.tokens(&x, b, dev)?)
    };
    Ok(Batch::new(ids(1)?, ids(7)?))
}

/// Model config by name; `tiny` is the CPU report's model.
pub fn config(size: &str) -> Result<LmConfig> {
    Ok(if size == "tiny" {
        LmConfig::tiny(model::VOCAB)
    } else {
        LmConfig::by_name(size)?
    })
}

/// [`config`] with `vocab` tokens where given (`bench single --vocab`), else the size's.
pub fn config_vocab(size: &str, vocab: Option<usize>) -> Result<LmConfig> {
    let mut cfg = config(size)?;
    cfg.vocab = vocab.unwrap_or(cfg.vocab);
    Ok(cfg)
}

/// The DDP benchmark on `ranks` ranks (CPU threads, or NCCL: one launched process per
/// GPU); rank 0 prints and appends the records to `out`.
pub fn run(
    nccl: bool,
    ranks: usize,
    cfg: &DdpBenchConfig,
    out: &crate::records::Out,
) -> Result<()> {
    crate::group::run(nccl, ranks, "DDP benchmark", Some(&header()), |r| {
        let mut sink = (r.comm.rank() == 0).then(|| crate::records::print_and_store(out, row));
        let tracer = r.nccl.filter(|_| cfg.trace_dir.is_some());
        run_rank(r.comm, tracer, &r.device, cfg, |rec| {
            sink.as_mut().map_or(Ok(()), |f| f(rec))
        })
    })
}

/// One more eager step of a fresh DDP with `opts` with a timeline on: returns (overlap
/// ratio, step ms); rank 0 writes the Chrome trace to `dir`.
fn traced_step(
    nccl: &Arc<NcclComm>,
    dir: &std::path::Path,
    title: &str,
    (lm, batch): (&TransformerLm, &Batch),
    opts: (DdpOptions, StepOptions),
) -> Result<(f64, f64)> {
    let mut d = Ddp::new(nccl.clone(), lm, opts.0)?;
    let marker = nccl.clone();
    d.set_stage_hook(Some(Box::new(move |s| marker.mark(format!("bwd{s}")))));
    let so = StepOptions {
        graph: false,
        ..opts.1
    };
    let mut st = TrainStep::new(lm, Box::new(d), adamw_cfg(), so)?;
    st.step(lm, std::slice::from_ref(batch), LR)?; // the kernels load outside the trace
    st.flush()?;
    nccl.start_timeline()?;
    let run = st.step(lm, std::slice::from_ref(batch), LR).map(|_| ());
    let run = run.and_then(|()| Ok(nccl.mark("step")?));
    let timeline = nccl.take_timeline()?;
    run?;
    let spans = crate::trace::spans(&timeline, lm.num_stages());
    let step_ms = spans.iter().map(|s| s.end_ms).fold(0.0, f64::max);
    if nccl.rank() == 0 {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(format!("trace-{}.json", title.replace([' ', ':'], "-")));
        let json = crate::trace::chrome_trace(&spans, 0, title);
        std::fs::write(&path, serde_json::to_string(&json)?)?;
    }
    Ok((crate::trace::overlap_ratio(&spans), step_ms))
}

const LR: f64 = 1e-4;

fn adamw_cfg() -> AdamWConfig {
    AdamWConfig {
        lr: LR,
        ..AdamWConfig::default()
    }
}

/// Runs every (size, precision, strategy) on this rank; `sink` gets the records (rank 0).
/// With `tracer` (the same communicator, concretely NCCL) and `cfg.trace_dir`, each
/// strategy also runs one traced step.
pub fn run_rank(
    comm: Arc<dyn Communicator>,
    tracer: Option<Arc<NcclComm>>,
    dev: &Device,
    cfg: &DdpBenchConfig,
    mut sink: impl FnMut(&DdpRecord) -> Result<()>,
) -> Result<()> {
    if cfg.steps == 0 || cfg.batch == 0 {
        bail!("--steps and --batch must be at least 1");
    }
    if cfg.sm_carveouts.is_empty() {
        bail!("--sm-carveout is empty (0 runs without a carve-out)");
    }
    if cfg.coalesce.is_empty() {
        bail!("--coalesce is empty (false runs one launch per bucket)");
    }
    let c = comm.as_ref();
    for size in &cfg.sizes {
        let lc = config(size)?;
        for &prec in &cfg.dtypes {
            let mut lm = TransformerLm::new(lc.clone(), 0, dev)?;
            if prec == Precision::Bf16 {
                lm.set_compute_dtype(DType::BF16);
            }
            let batch = batch_for(&lm, c.rank(), cfg.batch, dev)?;
            let micro = std::slice::from_ref(&batch);
            let so = StepOptions {
                clip: cfg.clip,
                graph: cfg.graph,
                fp32_simt: prec == Precision::Fp32 && !model::tf32::tf32(),
                ..StepOptions::default()
            };
            // The DDP step runs AdamW where one GPU does (inside the backward without
            // clipping, after the norm with it): its compute alone is bench single's step,
            // and the records' compute_ms is single_ms.
            let counts = (cfg.warmup, cfg.steps);
            let single = time_local(&lm, micro, (adamw_cfg(), so, LR), counts, dev)?;
            let single_ms = mean_std(&single.ms).0;
            let runs = cfg.strategies.iter().flat_map(|&s| {
                let carve = cfg.sm_carveouts.iter();
                carve.flat_map(move |&c| cfg.coalesce.iter().map(move |&g| (s, c, g)))
            });
            for (strategy, carveout, coalesce) in runs {
                let grad_dtype = cfg.grads.dtype(prec);
                let dopts = DdpOptions {
                    grad_dtype,
                    gemm_sm_carveout: carveout,
                    coalesce,
                    ..DdpOptions::new(strategy)
                };
                let d = Ddp::new(comm.clone(), &lm, dopts)?;
                let mut st = TrainStep::new(&lm, Box::new(d), adamw_cfg(), so)?;
                let steps = time_steps(&mut st, &lm, micro, LR, (cfg.warmup, cfg.steps), dev)?;
                let graph = st.graph_status().err();
                let adamw = st.adamw_place().name().to_string();
                let peak = memory::gib(steps.peak_bytes);
                let d: &mut Ddp = st.strategy_as_mut().expect("built with Ddp");
                let stats = d.last_stats();
                let mut label = match strategy {
                    Strategy::Bucketed { bucket_mb } => format!("bucketed:{bucket_mb}"),
                    s => s.to_string(),
                };
                if carveout > 0 {
                    label += &format!(" sm-{carveout}");
                }
                if coalesce {
                    label += " coalesced";
                }
                let traced = match (&tracer, &cfg.trace_dir) {
                    (Some(t), Some(dir)) => {
                        let title =
                            format!("{size} {} {label}", format!("{prec:?}").to_lowercase());
                        let (ratio, ms) = traced_step(t, dir, &title, (&lm, &batch), (dopts, so))?;
                        let m = max_over_ranks(c, dev, &[ms])?;
                        Some((ratio, m[0]))
                    }
                    _ => None,
                };
                // Not a whole step: the all-reduces alone, on gradients made once.
                let (_, grads) = model::forward_backward(&lm, &batch, |_, _| Ok(()))?;
                let comm_only = timed(dev, 1, cfg.steps.min(5), || {
                    d.synchronize_grads(&grads)?;
                    Ok(())
                })?;
                drop(grads);
                let (step, step_std) = mean_std(&steps.ms);
                let m = max_over_ranks(
                    c,
                    dev,
                    &[single_ms, step, step_std, mean_std(&comm_only.gpu).0],
                )?;
                let rec = DdpRecord {
                    bench: "ddp".into(),
                    backend: c.backend().into(),
                    world: c.world_size(),
                    size: size.clone(),
                    dtype: prec,
                    strategy: match strategy {
                        Strategy::Bucketed { .. } => "bucketed".into(),
                        s => s.to_string(),
                    },
                    bucket_mb: match strategy {
                        Strategy::Bucketed { bucket_mb } => Some(bucket_mb),
                        _ => None,
                    },
                    grad_dtype: if grad_dtype.is_some() { "bf16" } else { "fp32" }.into(),
                    batch_per_rank: cfg.batch,
                    steps: cfg.steps,
                    collectives: stats.collectives,
                    comm_bytes: stats.bytes,
                    single_ms: m[0],
                    compute_ms: m[0],
                    step_ms: m[1],
                    step_std_ms: m[2],
                    comm_ms: m[3],
                    exposed_ms: (m[1] - m[0]).max(0.0),
                    peak_gib: peak,
                    loss_last: steps.losses.last().copied().unwrap_or(f32::NAN),
                    overlap_ratio: traced.map(|t| t.0),
                    traced_step_ms: traced.map(|t| t.1),
                    sm_carveout: carveout,
                    coalesce,
                    launches: Some(stats.launches),
                    host_ms: None,
                    graph: Some(graph.is_none()),
                    graph_fallback: graph,
                    adamw: Some(adamw),
                    gpu: steps.telemetry,
                    single_gpu: single.telemetry,
                    nccl_env: (c.backend() == "nccl")
                        .then(crate::records::nccl_tuning)
                        .flatten(),
                };
                sink(&rec)?;
            }
        }
    }
    Ok(())
}

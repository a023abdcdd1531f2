//! Optimizer-state sharding benchmark (the seeds' optimizer_state_sharding_accounting):
//! per dtype and mode, on every rank of a launched group, a fresh model and the step `train`
//! runs (`step::TrainStep`, no clipping) with that mode's synchronisation:
//!   - `ddp`: bucketed DDP + AdamW (every rank holds all moments);
//!   - `sharded`: bucketed DDP + ShardedOptimizer (moments for owned parameters; owners
//!     broadcast updates);
//!   - `zero1`: ZeRO-1 with one bucket, reduce-scattered after the backward
//!     (`Zero1Overlap` with `Strategy::Flat`);
//!   - `zero1-overlap`: ZeRO-1 through DDP's buckets, reduce-scatters during the backward;
//!   - `zero1-ahead`: the same, its all-gathers overlapping the next forward;
//!   - `zero2`: `zero1-ahead` freeing each bucket's gradients once scattered, during the
//!     backward (`DdpOptions::release_gradients`; train's `--strategy zero2`).
//!
//! Memory (CUDA pool, GiB), from an eager step: in use after initialisation, directly
//! before and after the optimizer update of a steady-state step (`TrainStep::set_probe`),
//! and the peak of that step; the analytic persistent part (f32 parameters, gradients,
//! moments; not a bf16 model's weight copies) beside it. Step time: `step_timing::time_steps`
//! (the step captured as one CUDA graph where it can be: `graph`), the slowest rank's mean,
//! beside `single_ms`, `bench single`'s step on the same model in the same run (the own
//! 1-GPU step, as `bench ddp` has it).

use crate::memory;
use crate::single::Precision;
use crate::timer::Timer;
use anyhow::{bail, Result};
use candle_core::{DType, Device, Tensor};
use comm::{Communicator, ReduceOp};
use ddp::{Ddp, DdpOptions, Strategy};
use model::{AdamWConfig, Batch, StagedModel, TransformerLm};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use step::{StepOptions, TrainStep};
use zero1::{ParamGroup, ShardedOptimizer, Zero1Overlap};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ZeroRecord {
    pub bench: String, // "zero1"
    pub backend: String,
    pub world: usize,
    pub size: String,
    /// The model's compute dtype (records before it existed were fp32).
    #[serde(default = "fp32")]
    pub dtype: Precision,
    pub mode: String,
    pub bucket_mb: f64,
    pub batch_per_rank: usize,
    pub steps: usize,
    pub step_ms: f64,
    pub step_std_ms: f64,
    /// The mode's collectives alone (gradient sync and parameter exchange).
    pub comm_ms: f64,
    pub after_init_gib: Option<f64>,
    /// Read by the step's probe right before the optimizer update; `None` where AdamW runs
    /// inside the backward (the `ddp` mode without clipping), which has no such point.
    pub before_step_gib: Option<f64>,
    pub after_step_gib: Option<f64>,
    /// SMs the backward's GEMMs left to NCCL (`--sm-carveout`; 0: none).
    #[serde(default)]
    pub sm_carveout: usize,
    /// Buckets ready at one stage launched as one NCCL group (`--coalesce`).
    #[serde(default)]
    pub coalesce: bool,
    pub peak_gib: Option<f64>,
    /// The timed steps ran as one CUDA graph.
    #[serde(default)]
    pub graph: bool,
    /// Kernel launches in one replay of that graph.
    #[serde(default)]
    pub graph_kernels: Option<usize>,
    /// This GPU alone on the same model: `bench single`'s step (`step::Local`, one CUDA
    /// graph, AdamW where it runs fastest), timed in the same run; the slowest rank's mean.
    #[serde(default)]
    pub single_ms: Option<f64>,
    /// Analytic, this rank: parameters, gradients and AdamW moments (f32).
    pub params_gib: f64,
    pub grads_gib: f64,
    pub state_gib: f64,
}

fn fp32() -> Precision {
    Precision::Fp32
}

fn adamw_cfg() -> AdamWConfig {
    AdamWConfig {
        lr: 1e-4,
        ..AdamWConfig::default()
    }
}

fn current(dev: &Device) -> Option<f64> {
    memory::gib(memory::current(dev))
}

/// Mode `mode`'s synchronisation of `lm`'s gradients (in bf16 for a bf16 model, as
/// `train` sends them).
fn sync_for(
    (mode, prec): (&str, Precision),
    comm: &Arc<dyn Communicator>,
    lm: &TransformerLm,
    cfg: &ZeroBenchConfig,
) -> Result<Box<dyn step::Strategy>> {
    let opts = |s| DdpOptions {
        grad_dtype: (prec == Precision::Bf16).then_some(DType::BF16),
        gemm_sm_carveout: cfg.sm_carveout,
        coalesce: cfg.coalesce,
        ..DdpOptions::new(s)
    };
    let bucketed = Strategy::Bucketed {
        bucket_mb: cfg.bucket_mb,
    };
    Ok(match mode {
        "ddp" => Box::new(Ddp::new(comm.clone(), lm, opts(bucketed))?),
        "sharded" => {
            let g = ParamGroup {
                params: lm.params().vars().to_vec(),
                cfg: adamw_cfg(),
            };
            Box::new(zero1::Sharded::new(
                Ddp::new(comm.clone(), lm, opts(bucketed))?,
                ShardedOptimizer::new(comm.clone(), vec![g])?,
            ))
        }
        "zero1" | "zero1-overlap" | "zero1-ahead" | "zero2" => {
            let s = if mode == "zero1" {
                Strategy::Flat
            } else {
                bucketed
            };
            let o = DdpOptions {
                release_gradients: mode == "zero2",
                ..opts(s)
            };
            let mut z = Zero1Overlap::new(comm.clone(), lm, o, adamw_cfg())?;
            z.set_gather_ahead(matches!(mode, "zero1-ahead" | "zero2"));
            Box::new(z)
        }
        m => bail!(
            "--modes: unknown mode {m:?} (ddp, sharded, zero1, zero1-overlap, zero1-ahead, zero2)"
        ),
    })
}

pub struct ZeroBenchConfig {
    pub size: String,
    /// The model's compute dtypes, each run over every mode.
    pub dtypes: Vec<Precision>,
    /// Any of "ddp", "sharded", "zero1", "zero1-overlap", "zero1-ahead", "zero2" (zero1-overlap whose
    /// all-gathers overlap the next forward).
    pub modes: Vec<String>,
    /// DDP's bucket size in the ddp, sharded and zero1-overlap/-ahead modes.
    pub bucket_mb: f64,
    /// SMs the backward's GEMMs leave to NCCL in those modes.
    pub sm_carveout: usize,
    /// Coalesced bucket launches in those modes ([`DdpOptions::coalesce`]).
    pub coalesce: bool,
    pub warmup: usize,
    pub steps: usize,
    pub batch: usize,
    /// Time the step captured as one CUDA graph (CUDA only).
    pub graph: bool,
}

/// The benchmark on `ranks` ranks (CPU threads, or NCCL: one launched process per GPU);
/// rank 0 prints and appends the records to `out`.
pub fn run(
    nccl: bool,
    ranks: usize,
    cfg: &ZeroBenchConfig,
    out: &crate::records::Out,
) -> Result<()> {
    crate::group::run(nccl, ranks, "ZeRO benchmark", Some(&header()), |r| {
        let mut sink = (r.comm.rank() == 0).then(|| crate::records::print_and_store(out, row));
        run_rank(r.comm, &r.device, cfg, |rec| {
            sink.as_mut().map_or(Ok(()), |f| f(rec))
        })
    })
}

pub fn run_rank(
    comm: Arc<dyn Communicator>,
    dev: &Device,
    cfg: &ZeroBenchConfig,
    mut sink: impl FnMut(&ZeroRecord) -> Result<()>,
) -> Result<()> {
    let (size, bucket_mb, warmup, steps, batch) =
        (&cfg.size, cfg.bucket_mb, cfg.warmup, cfg.steps, cfg.batch);
    if steps == 0 || batch == 0 {
        bail!("--steps and --batch must be at least 1");
    }
    if cfg.dtypes.is_empty() {
        bail!("--dtype is empty (fp32, bf16)");
    }
    let c = comm.as_ref();
    let w = c.world_size();
    let lr = adamw_cfg().lr;
    // bench single's step per dtype (the model is the same in every mode).
    let mut singles: Vec<(Precision, f64)> = Vec::new();
    let runs = cfg
        .dtypes
        .iter()
        .flat_map(|&p| cfg.modes.iter().map(move |m| (p, m)));
    for (prec, mode) in runs {
        memory::reset_peak(dev);
        let mut lm = TransformerLm::new(crate::ddp::config(size)?, 0, dev)?;
        if prec == Precision::Bf16 {
            lm.set_compute_dtype(DType::BF16);
        }
        let fp32_simt = prec == Precision::Fp32 && !model::tf32::tf32();
        let n: usize = lm.params().vars().iter().map(|v| v.elem_count()).sum();
        let b = crate::ddp::batch_for(&lm, c.rank(), batch, dev)?;
        let micro = [b.clone()];
        // Memory: eager steps, read around the update of the second.
        let eager = StepOptions {
            graph: false,
            fp32_simt,
            ..StepOptions::default()
        };
        let mut st = TrainStep::new(
            &lm,
            sync_for((mode, prec), &comm, &lm, cfg)?,
            adamw_cfg(),
            eager,
        )?;
        let after_init = current(dev);
        let state_elems = st.strategy().state_elements(n);
        st.step(&lm, &micro, lr)?;
        st.flush()?;
        let before = std::rc::Rc::new(std::cell::Cell::new(None));
        let (probe, d) = (before.clone(), dev.clone());
        st.set_probe(Some(Box::new(move || probe.set(current(&d)))));
        memory::reset_peak(dev);
        st.step(&lm, &micro, lr)?;
        st.flush()?;
        let after = current(dev);
        let peak = memory::gib(memory::peak(dev));
        st.set_probe(None);
        let comm_ms = comm_only(c, dev, &mut st, &lm, &b, n)?;
        drop(st);
        // Time: the same step, captured where it can be.
        let timed = StepOptions {
            graph: cfg.graph,
            fp32_simt,
            ..StepOptions::default()
        };
        let mut st = TrainStep::new(
            &lm,
            sync_for((mode, prec), &comm, &lm, cfg)?,
            adamw_cfg(),
            timed,
        )?;
        let run = crate::step_timing::time_steps(&mut st, &lm, &micro, lr, (warmup, steps), dev)?;
        let graph = st.graph_status().is_ok();
        let graph_kernels = st.graph_kernels();
        drop(st);
        let single_ms = match singles.iter().find(|(p, _)| *p == prec) {
            Some(&(_, ms)) => ms,
            None => {
                let (how, counts) = ((adamw_cfg(), timed, lr), (warmup, steps));
                let single = crate::step_timing::time_local(&lm, &micro, how, counts, dev)?;
                let ms = crate::timer::mean_std(&single.ms).0;
                singles.push((prec, ms));
                ms
            }
        };
        let (m, sd) = crate::timer::mean_std(&run.ms);
        let t = Tensor::new(&[m, sd, comm_ms, single_ms], dev)?;
        c.all_reduce(&t, ReduceOp::Max)?;
        let v: Vec<f64> = t.to_device(&Device::Cpu)?.to_vec1()?;
        let gib = |e: usize| e as f64 * 4.0 / (1u64 << 30) as f64;
        sink(&ZeroRecord {
            bench: "zero1".into(),
            backend: c.backend().into(),
            world: w,
            size: size.clone(),
            dtype: prec,
            mode: mode.clone(),
            bucket_mb,
            batch_per_rank: batch,
            steps,
            step_ms: v[0],
            step_std_ms: v[1],
            comm_ms: v[2],
            after_init_gib: after_init,
            before_step_gib: before.get(),
            after_step_gib: after,
            sm_carveout: cfg.sm_carveout,
            coalesce: cfg.coalesce,
            peak_gib: peak,
            graph,
            graph_kernels,
            single_ms: Some(v[3]),
            params_gib: gib(n),
            grads_gib: gib(n),
            state_gib: gib(2 * state_elems),
        })?;
    }
    Ok(())
}

/// Mean time of the mode's collectives alone (5 repetitions after one warm-up).
fn comm_only(
    c: &dyn Communicator,
    dev: &Device,
    st: &mut TrainStep,
    lm: &TransformerLm,
    b: &Batch,
    n: usize,
) -> Result<f64> {
    let w = c.world_size();
    let sharded = st.strategy_as::<zero1::Sharded>().is_some();
    let zero1 = st.strategy_as::<Zero1Overlap>().is_some();
    let ddp: Option<&mut Ddp> = match sharded {
        true => st.strategy_as_mut::<zero1::Sharded>().map(|s| s.ddp_mut()),
        false => st.strategy_as_mut::<Ddp>(),
    };
    let mut ts = Vec::new();
    if let Some(d) = ddp {
        // Not a whole step: the collectives alone, on gradients made once.
        let (_, g) = model::forward_backward(lm, b, |_, _| Ok(()))?;
        for i in 0..6 {
            let t = Timer::start(dev)?;
            d.synchronize_grads(&g)?;
            if sharded {
                // Parameter exchange: every element broadcast once from its owner.
                let p = Tensor::zeros(n.div_ceil(w), DType::F32, dev)?;
                for r in 0..w {
                    c.broadcast(&p, r)?;
                }
            }
            let s = t.stop()?;
            if i > 0 {
                ts.push(s * 1e3);
            }
        }
    } else if zero1 {
        // The same volume as the modes' collectives, as one reduce-scatter and one
        // all-gather of all parameters.
        let padded = n.div_ceil(w) * w;
        let flat = Tensor::zeros(padded, DType::F32, dev)?;
        let shard = Tensor::zeros(padded / w, DType::F32, dev)?;
        for i in 0..6 {
            let t = Timer::start(dev)?;
            c.reduce_scatter(&flat, &shard, ReduceOp::Avg)?;
            c.all_gather(&shard, &flat)?;
            let s = t.stop()?;
            if i > 0 {
                ts.push(s * 1e3);
            }
        }
    } else {
        bail!("one rank's local step has no collectives to time");
    }
    Ok(crate::timer::mean_std(&ts).0)
}

pub fn header() -> String {
    format!(
        "{:>5} {:>5} {:>2} {:>13} {:>9} {:>6} {:>9} {:>7} {:>9} {:>8} {:>8} {:>8} {:>8} {:>9}",
        "size",
        "dtype",
        "w",
        "mode",
        "step(ms)",
        "±",
        "1gpu(ms)",
        "÷1gpu",
        "comm(ms)",
        "init",
        "before",
        "after",
        "peak",
        "expected"
    )
}

pub fn row(r: &ZeroRecord) -> String {
    let g = |x: Option<f64>| x.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into());
    let mode = match r.coalesce {
        true => format!("{}/g", r.mode),
        false => r.mode.clone(),
    };
    format!(
        "{:>5} {:>5} {:>2} {:>13} {:>9.2} {:>6.2} {:>9} {:>7} {:>9.1} {:>8} {:>8} {:>8} {:>8} {:>9.1}",
        r.size,
        r.dtype.name(),
        r.world,
        mode,
        r.step_ms,
        r.step_std_ms,
        r.single_ms.map_or("-".into(), |v| format!("{v:.2}")),
        r.single_ms.map_or("-".into(), |v| format!("{:.3}", r.step_ms / v)),
        r.comm_ms,
        g(r.after_init_gib),
        g(r.before_step_gib),
        g(r.after_step_gib),
        g(r.peak_gib),
        r.params_gib + r.grads_gib + r.state_gib
    )
}

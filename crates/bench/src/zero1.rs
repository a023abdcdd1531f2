//! Optimizer-state sharding benchmark (the seeds' optimizer_state_sharding_accounting):
//! per mode, on every rank of a launched group, a fresh model and optimizer:
//!   - `ddp`: bucketed DDP + AdamW (every rank holds all moments);
//!   - `sharded`: bucketed DDP + ShardedOptimizer (moments for owned parameters; owners
//!     broadcast updates);
//!   - `zero1`: Zero1 (reduce-scatter gradients, step the chunk, all-gather parameters).
//!
//! Memory (CUDA pool, GiB): in use after initialisation, directly before and directly
//! after the optimizer step of a steady-state step, and the peak of that step; the
//! analytic expectation of the persistent part (parameters, gradients, moments) beside it.
//! Step time: CUDA-event mean over `steps`, slowest rank.

use crate::memory;
use crate::timer::Timer;
use anyhow::{bail, Result};
use candle_core::{DType, Device, Tensor};
use comm::{Communicator, ReduceOp};
use ddp::{Ddp, DdpOptions, Strategy};
use model::{AdamW, AdamWConfig, Batch, StagedModel, TransformerLm};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use zero1::{ParamGroup, ShardedOptimizer, Zero1, Zero1Overlap};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ZeroRecord {
    pub bench: String, // "zero1"
    pub backend: String,
    pub world: usize,
    pub size: String,
    pub mode: String,
    pub bucket_mb: f64,
    pub batch_per_rank: usize,
    pub steps: usize,
    pub step_ms: f64,
    pub step_std_ms: f64,
    /// The mode's collectives alone (gradient sync and parameter exchange).
    pub comm_ms: f64,
    pub after_init_gib: Option<f64>,
    pub before_step_gib: Option<f64>,
    pub after_step_gib: Option<f64>,
    /// SMs the backward's GEMMs left to NCCL (`--sm-carveout`; 0: none).
    #[serde(default)]
    pub sm_carveout: usize,
    /// Buckets ready at one stage launched as one NCCL group (`--coalesce`).
    #[serde(default)]
    pub coalesce: bool,
    pub peak_gib: Option<f64>,
    /// Analytic, this rank: parameters, gradients and AdamW moments (f32).
    pub params_gib: f64,
    pub grads_gib: f64,
    pub state_gib: f64,
}

enum Opt {
    Ddp(Ddp, AdamW),
    Sharded(Ddp, ShardedOptimizer),
    Zero(Zero1),
    /// ZeRO-1 through ddp's buckets: reduce-scatter overlapped with backward.
    Overlap(Zero1Overlap),
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

/// Forward + backward (+ gradient sync for the DDP modes): returns what the step needs.
fn backward(o: &mut Opt, lm: &TransformerLm, b: &Batch) -> Result<model::Grads> {
    Ok(match o {
        Opt::Ddp(d, _) | Opt::Sharded(d, _) => {
            d.forward_backward(lm, b)?;
            d.finish_gradient_synchronization()?
        }
        Opt::Zero(_) => model::forward_backward(lm, b, |_, _| Ok(()))?.1,
        Opt::Overlap(z) => {
            z.forward_backward(lm, b)?;
            Vec::new()
        }
    })
}

fn step(o: &mut Opt, lm: &TransformerLm, g: &model::Grads) -> Result<()> {
    let vars = lm.params().vars();
    match o {
        Opt::Ddp(_, a) => a.step(vars, g)?,
        Opt::Sharded(_, s) => s.step(vars, g)?,
        Opt::Zero(z) => z.step(g)?,
        Opt::Overlap(z) => z.step()?,
    }
    Ok(())
}

pub struct ZeroBenchConfig {
    pub size: String,
    /// Any of "ddp", "sharded", "zero1", "zero1-overlap", "zero1-ahead" (zero1-overlap whose
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
    let c = comm.as_ref();
    let w = c.world_size();
    for mode in &cfg.modes {
        memory::reset_peak(dev);
        let lm = TransformerLm::new(crate::ddp::config(size)?, 0, dev)?;
        let vars = lm.params().vars().to_vec();
        let n: usize = vars.iter().map(|v| v.elem_count()).sum();
        let strategy = Strategy::Bucketed { bucket_mb };
        let opts = DdpOptions {
            gemm_sm_carveout: cfg.sm_carveout,
            coalesce: cfg.coalesce,
            ..DdpOptions::new(strategy)
        };
        let mut o = match mode.as_str() {
            "ddp" => Opt::Ddp(Ddp::new(comm.clone(), &lm, opts)?, AdamW::new(adamw_cfg())?),
            "sharded" => Opt::Sharded(
                Ddp::new(comm.clone(), &lm, opts)?,
                ShardedOptimizer::new(
                    comm.clone(),
                    vec![ParamGroup {
                        params: vars.clone(),
                        cfg: adamw_cfg(),
                    }],
                )?,
            ),
            "zero1" => Opt::Zero(Zero1::new(comm.clone(), &vars, adamw_cfg())?),
            "zero1-overlap" | "zero1-ahead" => {
                let mut z = Zero1Overlap::new(comm.clone(), &lm, strategy, adamw_cfg())?;
                z.set_gather_ahead(mode == "zero1-ahead");
                z.set_gemm_sm_carveout(cfg.sm_carveout)?;
                z.set_coalesce(cfg.coalesce);
                Opt::Overlap(z)
            }
            m => bail!(
                "--modes: unknown mode {m:?} (ddp, sharded, zero1, zero1-overlap, zero1-ahead)"
            ),
        };
        let state_elems = match &o {
            Opt::Ddp(..) => n,
            Opt::Sharded(_, s) => s.owned_elements(),
            Opt::Zero(z) => z.state_elements(),
            Opt::Overlap(z) => z.state_elements(),
        };
        let after_init = current(dev);
        let b = crate::ddp::batch_for(&lm, c.rank(), batch, dev)?;
        let mut times = Vec::with_capacity(steps);
        for i in 0..warmup + steps {
            let t = Timer::start(dev)?;
            let g = backward(&mut o, &lm, &b)?;
            step(&mut o, &lm, &g)?;
            drop(g);
            if i + 1 == warmup + steps {
                // zero1-ahead: every timed forward waited for the step before it; the last
                // step's all-gathers are counted here.
                if let Opt::Overlap(z) = &mut o {
                    z.sync_params()?;
                }
            }
            let s = t.stop()?;
            if i >= warmup {
                times.push(s * 1e3);
            }
        }
        // One more step with the memory read at its points.
        memory::reset_peak(dev);
        let g = backward(&mut o, &lm, &b)?;
        let before = current(dev);
        step(&mut o, &lm, &g)?;
        drop(g);
        let after = current(dev);
        let peak = memory::gib(memory::peak(dev));
        let comm_ms = comm_only(c, dev, &mut o, &lm, &b, n)?;
        let (m, sd) = crate::timer::mean_std(&times);
        let t = Tensor::new(&[m, sd, comm_ms], dev)?;
        c.all_reduce(&t, ReduceOp::Max)?;
        let v: Vec<f64> = t.to_device(&Device::Cpu)?.to_vec1()?;
        let gib = |e: usize| e as f64 * 4.0 / (1u64 << 30) as f64;
        sink(&ZeroRecord {
            bench: "zero1".into(),
            backend: c.backend().into(),
            world: w,
            size: size.clone(),
            mode: mode.clone(),
            bucket_mb,
            batch_per_rank: batch,
            steps,
            step_ms: v[0],
            step_std_ms: v[1],
            comm_ms: v[2],
            after_init_gib: after_init,
            before_step_gib: before,
            after_step_gib: after,
            sm_carveout: cfg.sm_carveout,
            coalesce: cfg.coalesce,
            peak_gib: peak,
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
    o: &mut Opt,
    lm: &TransformerLm,
    b: &Batch,
    n: usize,
) -> Result<f64> {
    let w = c.world_size();
    let sharded = matches!(o, Opt::Sharded(..));
    let mut ts = Vec::new();
    match o {
        Opt::Ddp(d, _) | Opt::Sharded(d, _) => {
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
        }
        Opt::Zero(_) | Opt::Overlap(_) => {
            // The same volume as the modes' bucketed collectives, as one reduce-scatter
            // and one all-gather of all parameters.
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
        }
    }
    Ok(crate::timer::mean_std(&ts).0)
}

pub fn header() -> String {
    format!(
        "{:>5} {:>2} {:>13} {:>9} {:>6} {:>9} {:>8} {:>8} {:>8} {:>8} {:>9}",
        "size",
        "w",
        "mode",
        "step(ms)",
        "±",
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
        "{:>5} {:>2} {:>13} {:>9.1} {:>6.1} {:>9.1} {:>8} {:>8} {:>8} {:>8} {:>9.1}",
        r.size,
        r.world,
        mode,
        r.step_ms,
        r.step_std_ms,
        r.comm_ms,
        g(r.after_init_gib),
        g(r.before_step_gib),
        g(r.after_step_gib),
        g(r.peak_gib),
        r.params_gib + r.grads_gib + r.state_gib
    )
}

//! `bench model-check`'s CUDA-graph check of the training step users run
//! (`step::TrainStep`, alone, under DDP or ZeRO-1 over a one-rank NCCL group): ten steps
//! of the tiny LM, each on its own batch and learning rate,
//! eager against one eager step and nine replays of the captured whole step (forward,
//! backward, the norm and clipping where AdamW runs after the backward, AdamW; inside the
//! backward with DDP, each bucket's update after its all-reduce). The
//! weights must agree within 1e-6 relative (fp32); bf16 within 1e-2. The device must not
//! track per-allocation events (comm's `cuda_device`), as for every captured step.

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use comm::Communicator;
use ddp::{Ddp, DdpOptions, Strategy};
use model::{AdamWConfig, Batch, LmConfig, StagedModel, TransformerLm};
use std::sync::Arc;
use step::{AdamwPlace, StepOptions, TrainStep};
use zero1::Zero1Overlap;

const STEPS: u32 = 10;

fn lm(dev: &Device, dtype: DType) -> Result<TransformerLm> {
    let mut lm = TransformerLm::new(LmConfig::tiny(512), 42, dev)?;
    lm.set_compute_dtype(dtype);
    Ok(lm)
}

/// Step `s`'s batch (host tensors): 4 sequences of 32 tokens, different every step.
fn batch(s: u32) -> Result<Batch> {
    let ids: Vec<u32> = (0..4 * 32).map(|i| (i * 37 + s * 101) % 512).collect();
    let tg: Vec<u32> = (0..4 * 32).map(|i| (i * 91 + s * 53) % 512).collect();
    Ok(Batch::new(
        Tensor::from_vec(ids, (4, 32), &Device::Cpu)?,
        Tensor::from_vec(tg, (4, 32), &Device::Cpu)?,
    ))
}

/// How the checked step synchronises: alone, or DDP (bucketed, gradients in the model's
/// dtype, as `train` runs it) or ZeRO-1 over `comm` (NCCL, world 1: the collectives are
/// captured and replayed like any other).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Over {
    Local,
    Ddp,
    Zero1,
}

fn sync(
    over: Over,
    lm: &TransformerLm,
    dtype: DType,
    comm: &Arc<dyn Communicator>,
) -> Result<Box<dyn step::Strategy>> {
    let bucketed = Strategy::Bucketed { bucket_mb: 0.05 };
    Ok(match over {
        Over::Local => Box::new(step::Local),
        Over::Ddp => {
            let o = DdpOptions {
                grad_dtype: Some(dtype),
                gather_rows: true,
                ..DdpOptions::new(bucketed)
            };
            Box::new(Ddp::new(comm.clone(), lm, o)?)
        }
        Over::Zero1 => {
            let cfg = AdamWConfig::default();
            let mut z = Zero1Overlap::new(comm.clone(), lm, bucketed, cfg)?;
            z.set_gather_ahead(true);
            Box::new(z)
        }
    })
}

/// A one-rank NCCL group on GPU 0 (its store on a free local port); the checked models
/// live on its device.
pub fn nccl_world_1() -> Result<Arc<comm::NcclComm>> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let env = comm::DistEnv {
        rank: 0,
        world_size: 1,
        local_rank: 0,
        master_addr: "127.0.0.1".into(),
        master_port: port,
    };
    Ok(Arc::new(comm::NcclComm::new(
        &env,
        0,
        comm::CommOptions::from_env()?,
    )?))
}

/// Ten steps of the tiny LM through `step::TrainStep` with `place`, eager or graphed.
/// Clipping at norm 0.05 (active at every step of this model) where AdamW runs after the
/// backward; none inside it (where it would not be exact).
fn train(
    dev: &Device,
    dtype: DType,
    place: AdamwPlace,
    over: (Over, &Arc<dyn Communicator>),
    graph: bool,
) -> Result<TransformerLm> {
    let lm = lm(dev, dtype)?;
    let opts = StepOptions {
        clip: if place == AdamwPlace::After {
            0.05
        } else {
            0.0
        },
        adamw: place,
        norm: step::NormPlace::default(),
        skip_nonfinite: false,
        graph,
        fp32_simt: false,
        side_blocks: 0,
        side_lag: model::in_backward::LAG,
    };
    let cfg = AdamWConfig {
        lr: 1e-3,
        ..AdamWConfig::default()
    };
    let mut st = TrainStep::new(&lm, sync(over.0, &lm, dtype, over.1)?, cfg, opts)?;
    for s in 0..STEPS {
        // A changing learning rate: the replays must read each step's own.
        st.step(&lm, &[batch(s)?], 1e-3 * (1.0 + s as f64 / 10.0))?;
    }
    st.flush()?;
    if st.adamw_place() != place {
        bail!(
            "{:?}: AdamW {place:?} asked for, {:?} ran",
            over.0,
            st.adamw_place()
        );
    }
    match (graph, st.graph_status()) {
        (true, Err(why)) => bail!("{dtype:?}, AdamW {place:?}, {:?}: no graph: {why}", over.0),
        (false, Ok(())) => bail!("{dtype:?}: the eager reference ran a graph"),
        _ => {}
    }
    Ok(lm)
}

/// Worst over parameters of max|w_graph − w_eager| / max|w_eager| after ten steps; an
/// error when capture fails (with its reason) or past the tolerance.
pub fn graph_vs_eager(
    gpu: &Device,
    dtype: DType,
    place: AdamwPlace,
    over: (Over, &Arc<dyn Communicator>),
) -> Result<f32> {
    let eager = train(gpu, dtype, place, over, false)?;
    let graphed = train(gpu, dtype, place, over, true)?;
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

/// Validation through `TrainStep::eval_loss`, its forward captured after one eager batch
/// and replayed for the other three, against the same without a graph: |Δ mean loss|.
pub fn eval_graph_vs_eager(gpu: &Device, dtype: DType) -> Result<f64> {
    let batches: Vec<Batch> = (0..4).map(batch).collect::<Result<_>>()?;
    let mut means = Vec::new();
    for graph in [false, true] {
        let lm = lm(gpu, dtype)?;
        let opts = StepOptions {
            graph,
            ..StepOptions::default()
        };
        let mut st = TrainStep::new(&lm, Box::new(step::Local), AdamWConfig::default(), opts)?;
        means.push(st.eval_loss(&lm, &batches)?);
        match (graph, st.eval_graph_status()) {
            (true, Some(Ok(()))) | (false, Some(Err(_))) => {}
            (_, s) => bail!("{dtype:?}: validation graph {graph}: {s:?}"),
        }
    }
    let d = (means[0] - means[1]).abs();
    if d.is_nan() || d > 1e-6 * means[0].abs() {
        bail!(
            "{dtype:?}: validation loss eager {} vs graph {}",
            means[0],
            means[1]
        );
    }
    Ok(d)
}

/// Every graph check, one line each (`bench model-check`).
pub fn print_all() -> Result<()> {
    let nccl = nccl_world_1().context("a one-rank NCCL group on GPU 0")?;
    let graph_dev = nccl.device().clone();
    let nccl: std::sync::Arc<dyn comm::Communicator> = nccl;
    use step::AdamwPlace as P;
    for (over, place) in [
        (Over::Local, P::After),
        (Over::Local, P::InBackward),
        (Over::Local, P::SideStream),
        (Over::Ddp, P::After),
        (Over::Ddp, P::InBackward),
        (Over::Ddp, P::SideStream),
        (Over::Zero1, P::After),
    ] {
        for dtype in [DType::F32, DType::BF16] {
            let d = graph_vs_eager(&graph_dev, dtype, place, (over, &nccl))?;
            println!("model-check CUDA graph, {over:?} (NCCL world 1 where not Local), AdamW {place:?}: TrainStep, 1 eager step + 9 replays of the captured whole step (forward, backward, collectives, norm and clipping at 0.05 where AdamW runs after, AdamW; learning rate changing) vs 10 eager steps of the same TrainStep, {dtype:?}: max |w_graph - w_eager| / max|w| = {d:.2e}: OK");
        }
    }
    for dtype in [DType::F32, DType::BF16] {
        let d = eval_graph_vs_eager(&graph_dev, dtype)?;
        println!("model-check validation graph (TrainStep::eval_loss: 1 eager batch + 3 replays of the captured forward) vs eager, {dtype:?}: |Δ mean loss| = {d:.2e}: OK");
    }
    Ok(())
}

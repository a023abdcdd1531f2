//! `bench ddp-check` (the `ddp-train --check` binary that was): trains a model
//! data-parallel for N steps through the step `train` runs (`step::TrainStep` with a
//! `ddp::Ddp`), sharding a global batch over the ranks, and checks it: step 0's averaged
//! gradients against the single process's on the whole batch; after the steps, every rank
//! bit-identical to rank 0, and rank 0 within `tol + rtol·|w|` of single-process training
//! (torch.testing.assert_close's rule). Any NaN or infinity fails it. Ranks come from
//! `group::run`, as every multi-rank benchmark's do.
//!
//!   bench ddp-check --backend cpu --ranks 4 --model toy --strategy bucketed:25
//!   comm-launch --nproc-per-node 4 -- bench ddp-check --backend cpu --model toy   (processes)
//!   comm-launch --nproc-per-node 2 -- bench ddp-check --backend nccl --model tiny

use anyhow::Result;
use candle_core::{DType, Device, Tensor};
use comm::{Communicator, ReduceOp};
use ddp::check::{max_abs_diff, worst_ratio};
use ddp::{shard_batch, Ddp, DdpOptions, Strategy};
use model::named::{build, global_batch};
use model::{AdamWConfig, StagedModel};
use std::sync::Arc;
use step::{StepOptions, TrainStep};

/// `bench ddp-check`'s flags.
#[derive(clap::Args, Clone)]
pub struct Args {
    /// Where the ranks run: nccl (a process per GPU), cpu, or auto.
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: crate::cli::BackendArg,
    /// Ranks (CPU threads, 1 to 256, or GPUs); under a launcher (RANK set) the launcher's
    /// WORLD_SIZE processes instead, for cpu as for nccl.
    #[arg(long, default_value_t = 2, value_parser = ranks)]
    pub ranks: usize,
    /// toy, tiny, or an LM size (small, medium, large, xl, 2.7B, 6.7B, 13B).
    #[arg(long, default_value = "toy")]
    model: String,
    /// naive, flat, overlap, bucketed:MB.
    #[arg(long, default_value = "bucketed:25")]
    strategy: String,
    /// Steps of each side (the weights compared after them; step 0's gradients too).
    #[arg(long, default_value_t = 5, value_parser = crate::cli::steps)]
    steps: usize,
    /// Sequences (or rows) per step over all ranks.
    #[arg(long, default_value_t = 8)]
    global_batch: usize,
    /// Communicate bf16 gradients.
    #[arg(long)]
    bf16_grads: bool,
    /// Launch the buckets ready at one stage as one coalesced collective (NCCL group).
    #[arg(long)]
    coalesce: bool,
    /// Absolute tolerance (finite, >= 0); default 1e-5, or 5e-3 with --bf16-grads (bf16
    /// rounding of every gradient on the wire).
    #[arg(long)]
    tol: Option<f32>,
    /// Relative tolerance (finite, >= 0).
    #[arg(long, default_value_t = 1.3e-6)]
    rtol: f32,
}

/// Most CPU ranks: each is a thread holding a model replica and its optimizer.
const MAX_RANKS: usize = 256;

fn ranks(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=MAX_RANKS).contains(&n) => Ok(n),
        _ => Err(format!(
            "{s:?} is not a rank count from 1 to {MAX_RANKS} (a CPU rank is a thread)"
        )),
    }
}

impl Args {
    /// --tol, or its default for the gradient dtype on the wire.
    fn tol(&self) -> f32 {
        self.tol
            .unwrap_or(if self.bf16_grads { 5e-3 } else { 1e-5 })
    }

    /// Refuses bad tolerances naming the flag, before any rank starts.
    pub fn validate(&self) -> Result<()> {
        Ok(ddp::check::validate_tolerances(
            self.tol(),
            self.rtol,
            "--tol",
            "--rtol",
        )?)
    }
}

/// Step 0's averaged gradients against the single process's full-batch gradients from the
/// same weights: worst max|Δg| / max|g| over parameters (rank 0; 0 elsewhere). A wrong
/// reduction (a sum, a lost bucket, a stale gradient) gives ~1; float reordering ~1e-6.
fn gradient_error(
    a: &Args,
    d: &mut Ddp,
    m: &dyn StagedModel,
    comm: &dyn Communicator,
    dev: &Device,
) -> Result<f32> {
    // Not step::TrainStep: this compares the synchronised gradients themselves, which a step
    // consumes before anything can read them.
    let (rank, world) = (comm.rank(), comm.world_size());
    let global = global_batch(&a.model, 0, a.global_batch, dev)?;
    d.forward_backward(m, &shard_batch(&global, rank, world)?)?;
    let g = d.finish_gradient_synchronization()?;
    if rank != 0 {
        return Ok(0.0);
    }
    let (_, single) = model::forward_backward(m, &global, |_, _| Ok(()))?;
    let mut worst = 0f32;
    for (x, y) in g.iter().zip(&single) {
        if let (Some(x), Some(y)) = (x, y) {
            let y32 = y.to_dtype(DType::F32)?.abs()?.flatten_all()?;
            let scale = y32.max(0)?.to_scalar::<f32>()?;
            worst = worst.max(max_abs_diff(x, y)? / scale.max(f32::MIN_POSITIVE));
        }
    }
    Ok(worst)
}

/// One rank's check (every rank of the group runs it).
pub fn run_rank(a: &Args, comm: Arc<dyn Communicator>, dev: &Device) -> Result<()> {
    let (rank, world) = (comm.rank(), comm.world_size());
    let strategy: Strategy = a.strategy.parse()?;
    fits(a, world, dev)?;
    // Each rank starts from other weights: Ddp::new must broadcast rank 0's.
    let m = build(&a.model, rank as u64 * 17, dev)?;
    let opts = DdpOptions {
        strategy,
        grad_dtype: a.bf16_grads.then_some(DType::BF16),
        coalesce: a.coalesce,
        // Every rank's share of the global batch is as large (shard_batch).
        gather_rows: true,
        ..DdpOptions::new(strategy)
    };
    let mut d = Ddp::new(comm.clone(), m.as_ref(), opts)?;
    let grad_err = gradient_error(a, &mut d, m.as_ref(), comm.as_ref(), dev)?;
    // The step users run (step::TrainStep: one CUDA graph with its collectives on NCCL).
    let cfg = AdamWConfig::default();
    let mut st = TrainStep::new(m.as_ref(), Box::new(d), cfg, StepOptions::default())?;
    for s in 0..a.steps as u64 {
        let global = global_batch(&a.model, s, a.global_batch, dev)?;
        st.step(m.as_ref(), &[shard_batch(&global, rank, world)?], cfg.lr)?;
        let l = st.flush()?.map_or(f64::NAN, |o| o.loss);
        if rank == 0 {
            let d: &Ddp = st.strategy_as().expect("built with Ddp");
            let n = d.last_stats().collectives;
            println!("step {s}: loss {l:.5} (mean over the ranks), {n} collectives");
        }
    }
    if rank == 0 {
        let how = st
            .graph_status()
            .map_or_else(|why| format!("eager ({why})"), |()| "one CUDA graph".into());
        println!("step: {how}; AdamW {}", st.adamw_place().name());
    }
    drop(st);
    // Rank 0's weights everywhere, then each rank's largest difference from them.
    let mut diff_ranks = 0f32;
    for v in m.params().vars() {
        let r0 = v.as_tensor().copy()?;
        comm.broadcast(&r0, 0)?;
        diff_ranks = diff_ranks.max(max_abs_diff(v.as_tensor(), &r0)?);
    }
    let (diff_single, ratio, worst) = match rank {
        0 => against_single(a, m.as_ref(), dev)?,
        _ => (0.0, 0.0, String::new()),
    };
    let t = Tensor::new(&[diff_ranks, diff_single, ratio, grad_err], dev)?;
    comm.all_reduce(&t, ReduceOp::Max)?;
    let v: Vec<f32> = t.to_device(&Device::Cpu)?.to_vec1()?;
    let grad_ok = v[3] <= if a.bf16_grads { 1e-2 } else { 1e-4 };
    // A NaN or inf anywhere comes back as +inf (ddp::check), which fails every bound.
    let ok = v.iter().all(|x| x.is_finite()) && v[0] == 0.0 && v[2] <= 1.0 && grad_ok;
    if rank == 0 {
        println!(
            "check {} {} {}{} world {world}{}: step-0 gradients max|Δg|/max|g| = {:.1e}; after {} steps max |w_rank - w_rank0| = {:.3e}, max |w_ddp - w_single| = {:.3e}, worst |diff| / ({:.0e} + {:.1e}|w|) = {:.3} at {worst}: {}",
            comm.backend(),
            a.model,
            a.strategy,
            if a.coalesce { " coalesced" } else { "" },
            if a.bf16_grads { " bf16 grads" } else { "" },
            v[3],
            a.steps,
            v[0],
            v[1],
            a.tol(),
            a.rtol,
            v[2],
            if ok { "OK" } else { "FAILED" }
        );
    }
    if !ok {
        anyhow::bail!("rank {rank}: DDP weights differ from single-process training");
    }
    Ok(())
}

/// Rank 0: the same steps in one process on the whole batch, and the largest difference,
/// the worst ratio to the tolerance and where it is.
fn against_single(a: &Args, m: &dyn StagedModel, dev: &Device) -> Result<(f32, f32, String)> {
    let single = build(&a.model, 0, dev)?;
    let cfg = AdamWConfig::default();
    let local = Box::new(step::Local);
    let mut o = TrainStep::new(single.as_ref(), local, cfg, StepOptions::default())?;
    for s in 0..a.steps as u64 {
        let b = global_batch(&a.model, s, a.global_batch, dev)?;
        o.step(single.as_ref(), &[b], cfg.lr)?;
    }
    o.flush()?;
    drop(o);
    let (mut diff, mut ratio, mut worst) = (0f32, 0f32, String::new());
    let names = m.params().names();
    let pairs = m.params().vars().iter().zip(single.params().vars());
    for (i, (x, y)) in pairs.enumerate() {
        diff = diff.max(max_abs_diff(x.as_tensor(), y.as_tensor())?);
        let r = worst_ratio(x.as_tensor(), y.as_tensor(), a.tol(), a.rtol)?;
        if r > ratio {
            (ratio, worst) = (r, names[i].clone());
        }
    }
    Ok((diff, ratio, worst))
}

/// Refuses, before a model is built, an LM that certainly cannot fit
/// (`model::budget`, a lower bound): on its GPU, or on the host for all of this
/// process's CPU ranks (threads without a launcher), plus rank 0's single-process model.
fn fits(a: &Args, world: usize, dev: &Device) -> Result<()> {
    use model::budget::{ensure_lm_step, ranks_in_this_process};
    let Some(cfg) = model::named::lm_config(&a.model)? else {
        return Ok(());
    };
    let rows = (a.global_batch / world).max(1);
    let flags = format!(
        "--model {} --global-batch {} on {world} ranks",
        a.model, a.global_batch
    );
    let here = ranks_in_this_process(world) + 1;
    ensure_lm_step(&flags, &cfg, rows, false, dev.is_cuda(), here)
}

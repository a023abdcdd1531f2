//! `ddp-train`: trains a model data-parallel for N steps with any strategy, sharding a
//! global batch over the ranks, through the step `train` runs (`step::TrainStep`). With `--check`, rank 0 also trains the same model alone on
//! the whole batch and every rank compares its final weights with it and with rank 0's.
//!
//!   ddp-train --backend cpu --world 4 --model toy --strategy bucketed:25 --check
//!   comm-launch --nproc-per-node 4 -- ddp-train --backend cpu --model toy --check   (processes)
//!   comm-launch --nproc-per-node 2 -- ddp-train --backend nccl --model tiny --check

use candle_core::{DType, Device, Tensor};
use clap::{Parser, ValueEnum};
use comm::{CommOptions, Communicator, ReduceOp};
use ddp::check::{max_abs_diff, worst_ratio};
use ddp::{shard_batch, Ddp, DdpOptions, Strategy};
use model::named::{build, global_batch};
use model::{AdamWConfig, StagedModel};
use std::sync::Arc;
use step::{StepOptions, TrainStep};

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Backend {
    /// nccl under a launcher (RANK set) where this binary was built with CUDA and a GPU is
    /// visible; else cpu (the choice is printed).
    Auto,
    Cpu,
    Nccl,
}

impl Backend {
    fn resolve(self) -> Backend {
        if self != Backend::Auto {
            return self;
        }
        let launched = std::env::var_os("RANK").is_some();
        let (b, why) = match (comm::Backend::auto(), launched) {
            ((comm::Backend::Nccl, why), true) => (Backend::Nccl, why),
            ((comm::Backend::Nccl, why), false) => (
                Backend::Cpu,
                format!("cpu threads ({why}, but NCCL ranks need a launcher: comm-launch)"),
            ),
            ((comm::Backend::Cpu, why), _) => (Backend::Cpu, why),
        };
        if comm::env::prints_for_all_ranks() {
            eprintln!("ddp-train: device: {why}; --backend nccl|cpu to choose");
        }
        b
    }
}

#[derive(Parser, Clone)]
#[command(about = "Data-parallel training of the ToyModel or the LM")]
struct Args {
    #[arg(long, value_enum, default_value = "auto")]
    backend: Backend,
    /// CPU ranks (threads, 1..=256); under a launcher (RANK set) the launcher's WORLD_SIZE
    /// processes, for cpu as for nccl.
    #[arg(long, default_value_t = 2, value_parser = parse_world)]
    world: usize,
    /// toy, tiny, or an LM size (small, medium, large, xl, 2.7B, 6.7B, 13B).
    #[arg(long, default_value = "toy")]
    model: String,
    /// naive, flat, overlap, bucketed:MB.
    #[arg(long, default_value = "bucketed:25")]
    strategy: String,
    #[arg(long, default_value_t = 5)]
    steps: u64,
    /// Sequences (or rows) per step over all ranks.
    #[arg(long, default_value_t = 8)]
    global_batch: usize,
    /// Communicate bf16 gradients.
    #[arg(long)]
    bf16_grads: bool,
    /// Launch the buckets ready at one stage as one coalesced collective (NCCL group).
    #[arg(long)]
    coalesce: bool,
    /// Compare with single-process training (rank 0) and across ranks: ranks must be
    /// bit-identical, and DDP within |w_ddp - w_single| <= tol + rtol * |w_single|
    /// elementwise (torch.testing.assert_close's rule; its float32 rtol by default).
    /// Any NaN or infinity in either side's weights fails the check.
    #[arg(long)]
    check: bool,
    /// Absolute tolerance of --check (finite, >= 0); default 1e-5, or 5e-3 with
    /// --bf16-grads (bf16 rounding of every gradient on the wire).
    #[arg(long)]
    tol: Option<f32>,
    /// Relative tolerance of --check (finite, >= 0).
    #[arg(long, default_value_t = 1.3e-6)]
    rtol: f32,
}

/// Most CPU ranks: each is a thread holding a model replica and its optimizer.
const MAX_CPU_WORLD: usize = 256;

fn parse_world(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=MAX_CPU_WORLD).contains(&n) => Ok(n),
        _ => Err(format!(
            "{s:?} is not a CPU rank count from 1 to {MAX_CPU_WORLD} (one thread per rank)"
        )),
    }
}

impl Args {
    /// --tol, or its default for the gradient dtype on the wire.
    fn tol(&self) -> f32 {
        self.tol
            .unwrap_or(if self.bf16_grads { 5e-3 } else { 1e-5 })
    }
}

/// Step 0's averaged gradients against the single process's full-batch gradients from the
/// same weights: worst max|Δg| / max|g| over parameters (rank 0; 0 elsewhere). A wrong
/// reduction (a sum, a lost bucket, a stale gradient) gives ~1; float reordering ~1e-6.
fn gradient_error(
    a: &Args,
    d: &mut Ddp,
    m: &dyn StagedModel,
    rank: usize,
    world: usize,
    dev: &Device,
) -> anyhow::Result<f32> {
    // Not step::TrainStep: this compares the synchronised gradients themselves, which a step
    // consumes before anything can read them.
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
            let scale = y
                .to_dtype(DType::F32)?
                .abs()?
                .flatten_all()?
                .max(0)?
                .to_scalar::<f32>()?;
            worst = worst.max(max_abs_diff(x, y)? / scale.max(f32::MIN_POSITIVE));
        }
    }
    Ok(worst)
}

fn rank_main(a: &Args, comm: Arc<dyn Communicator>, dev: &Device) -> anyhow::Result<()> {
    let (rank, world) = (comm.rank(), comm.world_size());
    let strategy: Strategy = a.strategy.parse()?;
    fits(a, world, dev)?;
    // Each rank starts from other weights: Ddp::new must broadcast rank 0's.
    let m = build(&a.model, rank as u64 * 17, dev)?;
    let opts = DdpOptions {
        strategy,
        grad_dtype: a.bf16_grads.then_some(DType::BF16),
        coalesce: a.coalesce,
        ..DdpOptions::new(strategy)
    };
    let mut d = Ddp::new(comm.clone(), m.as_ref(), opts)?;
    let grad_err = if a.check {
        gradient_error(a, &mut d, m.as_ref(), rank, world, dev)?
    } else {
        0.0
    };
    // The step users run (step::TrainStep: one CUDA graph with its collectives on NCCL).
    let cfg = AdamWConfig::default();
    let mut st = TrainStep::new(m.as_ref(), Box::new(d), cfg, StepOptions::default())?;
    for s in 0..a.steps {
        let global = global_batch(&a.model, s, a.global_batch, dev)?;
        let local = shard_batch(&global, rank, world)?;
        st.step(m.as_ref(), &[local], cfg.lr)?;
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
    if !a.check {
        return Ok(());
    }
    // Rank 0's weights everywhere, then each rank's largest difference from them.
    let mut diff_ranks = 0f32;
    for v in m.params().vars() {
        let r0 = v.as_tensor().copy()?;
        comm.broadcast(&r0, 0)?;
        diff_ranks = diff_ranks.max(max_abs_diff(v.as_tensor(), &r0)?);
    }
    let (mut diff_single, mut ratio, mut worst) = (0f32, 0f32, String::new());
    if rank == 0 {
        let single = build(&a.model, 0, dev)?;
        let cfg = AdamWConfig::default();
        let mut o = TrainStep::new(
            single.as_ref(),
            Box::new(step::Local),
            cfg,
            StepOptions::default(),
        )?;
        for s in 0..a.steps {
            let b = global_batch(&a.model, s, a.global_batch, dev)?;
            o.step(single.as_ref(), &[b], cfg.lr)?;
        }
        o.flush()?;
        drop(o);
        let names = m.params().names();
        for (i, (x, y)) in m
            .params()
            .vars()
            .iter()
            .zip(single.params().vars())
            .enumerate()
        {
            diff_single = diff_single.max(max_abs_diff(x.as_tensor(), y.as_tensor())?);
            let r = worst_ratio(x.as_tensor(), y.as_tensor(), a.tol(), a.rtol)?;
            if r > ratio {
                (ratio, worst) = (r, names[i].clone());
            }
        }
    }
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

/// Refuses, before a model is built, an LM that certainly cannot fit
/// (`model::budget`, a lower bound): on its GPU, or on the host for all of this
/// process's CPU ranks (threads without a launcher), one more model with --check.
fn fits(a: &Args, world: usize, dev: &Device) -> anyhow::Result<()> {
    use model::budget::{ensure_lm_step, ranks_in_this_process};
    let Some(cfg) = model::named::lm_config(&a.model)? else {
        return Ok(());
    };
    let rows = (a.global_batch / world).max(1);
    let flags = format!(
        "--model {} --global-batch {} on {world} ranks",
        a.model, a.global_batch
    );
    let here = ranks_in_this_process(world) + usize::from(a.check);
    ensure_lm_step(&flags, &cfg, rows, false, dev.is_cuda(), here)
}

fn run(a: Args) -> anyhow::Result<()> {
    ddp::check::validate_tolerances(a.tol(), a.rtol, "--tol", "--rtol")?;
    match a.backend.resolve() {
        Backend::Auto => unreachable!("resolved above"),
        // Under a launcher (RANK set): this process is one rank of the CPU process backend.
        Backend::Cpu if std::env::var_os("RANK").is_some() => {
            let (_, c) = comm::init_from_env(comm::Backend::Cpu, CommOptions::from_env()?)?;
            rank_main(&a, Arc::from(c), &Device::Cpu)
        }
        Backend::Cpu => {
            let comms = comm::cpu_group(a.world, CommOptions::from_env()?)?;
            std::thread::scope(|s| {
                let mut hs = Vec::new();
                for (r, c) in comms.into_iter().enumerate() {
                    let (a, world) = (a.clone(), a.world);
                    // A rank that cannot start drops its handle (and the unstarted
                    // ones theirs), which breaks the group for the started ranks.
                    let h = std::thread::Builder::new()
                        .name(format!("rank {r}"))
                        .spawn_scoped(s, move || rank_main(&a, Arc::new(c), &Device::Cpu))
                        .map_err(|e| {
                            anyhow::anyhow!("--world {world}: cannot start rank {r}'s thread: {e}")
                        })?;
                    hs.push(h);
                }
                for (r, h) in hs.into_iter().enumerate() {
                    h.join().map_err(|p| {
                        let msg = p
                            .downcast_ref::<String>()
                            .map(String::as_str)
                            .or_else(|| p.downcast_ref::<&str>().copied())
                            .unwrap_or("(no message)");
                        anyhow::anyhow!("rank {r} panicked: {msg}")
                    })??;
                }
                Ok::<_, anyhow::Error>(())
            })
        }
        Backend::Nccl => {
            // A build without CUDA says so first, not that RANK is missing.
            if let Err(e @ comm::CommError::Unavailable { .. }) = comm::nccl::gpu_count() {
                return Err(e.into());
            }
            let env = comm::DistEnv::from_env()?;
            let c = comm::NcclComm::new(&env, env.local_rank, CommOptions::from_env()?)?;
            // The communicator's device: its compute stream is the one collectives order with.
            let dev = c.device().clone();
            rank_main(&a, Arc::new(c), &dev)
        }
    }
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("ddp-train: error: {e:#}");
        std::process::exit(1);
    }
}

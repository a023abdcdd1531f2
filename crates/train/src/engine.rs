//! One rank's model and its training step (`step::TrainStep`: micro-batches, gradient
//! synchronisation, clipping by the global norm on the device, AdamW at the schedule's
//! rate, one CUDA graph, checkpoints), and the validation loss.
//!
//! Strategies: `single` (one rank, no communication), any ddp strategy (gradients
//! all-reduced), `zero1` (ZeRO-1: `zero1::Zero1Overlap`, buckets reduce-scattered during
//! the backward, the norm from every rank's slices, all-gathers ahead of the next forward),
//! `sharded` (ddp's all-reduce, then the optimizer state sharded over the ranks:
//! `zero1::ShardedOptimizer`).

use crate::config::TrainConfig;
use anyhow::Result;
use candle_core::{DType, Device};
use comm::{Communicator, ReduceOp};
use ddp::{Ddp, DdpOptions, Strategy};
use model::TransformerLm;
use seam::{AdamWConfig, Batch, StagedModel};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use step::{AdamwPlace, StepOptions, TrainStep};
use zero1::{ParamGroup, ShardedOptimizer, Zero1Overlap};

/// One rank's model and its training step.
pub struct Engine {
    pub comm: Arc<dyn Communicator>,
    pub dev: Device,
    pub model: TransformerLm,
    step: TrainStep,
}

/// What one step reports.
pub type StepOut = step::StepOut;

/// `ZERO1_MASTERS`: `sharded` (unset: the default; zero1::masters, the ZeRO paper's
/// ZeRO-1 and -2: zero1 and zero2 above one rank on GPUs keep each rank's part of the f32
/// masters only; bit for bit as whole ones on CPU ranks with resume,
/// tests/tests/zero1_masters.rs, and on nvidia-h200-x4, calls 90-92) or `whole`.
pub(crate) fn sharded_masters() -> Result<bool> {
    match std::env::var("ZERO1_MASTERS").as_deref() {
        Err(_) | Ok("sharded") => Ok(true),
        Ok("whole") => Ok(false),
        Ok(v) => {
            let e = format!("ZERO1_MASTERS={v:?}: sharded (the default) or whole");
            Err(crate::UserError(e).into())
        }
    }
}

/// FSDP's gathers (zero1::Zero1Overlap::set_fsdp_gathers): the last stages kept from
/// the forward for the backward, `FSDP_RESHARD_AFTER_FORWARD=0` (all: FSDP2's
/// `reshard_after_forward=False`) or `FSDP_KEEP_LAST=K` (the last K; 0 unset), and
/// `FSDP_PREFETCH` (stages gathered ahead, 1 to 4; 1 unset).
pub(crate) fn fsdp_gathers() -> Result<(usize, usize)> {
    let what = "the last stages kept gathered, 0 or more";
    let last = env_count("FSDP_KEEP_LAST", 0..=usize::MAX, what)?;
    let keep_last = match (std::env::var("FSDP_RESHARD_AFTER_FORWARD").as_deref(), last) {
        (Err(_) | Ok("1"), k) => k.unwrap_or(0),
        (Ok("0"), None) => usize::MAX,
        (Ok("0"), Some(k)) => {
            let e = format!(
                "FSDP_RESHARD_AFTER_FORWARD=0 keeps every stage, FSDP_KEEP_LAST={k} the last {k}: set one"
            );
            return Err(crate::UserError(e).into());
        }
        (Ok(v), _) => {
            let e = format!("FSDP_RESHARD_AFTER_FORWARD={v:?}: 1 (the default) or 0");
            return Err(crate::UserError(e).into());
        }
    };
    let depth = env_count("FSDP_PREFETCH", 1..=4, "the stages gathered ahead, 1 to 4")?;
    Ok((keep_last, depth.unwrap_or(1)))
}

/// FSDP's unit (zero1::Zero1Overlap::set_fsdp_unit): `FSDP_UNIT`, stages gathered as one
/// (1 to 8; unset, `None`: zero1's default, memplan::fsdp_unit).
pub(crate) fn fsdp_unit() -> Result<Option<usize>> {
    env_count("FSDP_UNIT", 1..=8, "stages gathered as one, 1 to 8")
}

/// The count in environment variable `name` (`None` unset); a value that is not an
/// integer in `range` is the user's error, naming the variable and `what` it takes.
fn env_count(
    name: &str,
    range: std::ops::RangeInclusive<usize>,
    what: &str,
) -> Result<Option<usize>> {
    match std::env::var(name) {
        Err(_) => Ok(None),
        Ok(v) => match v.parse::<usize>() {
            Ok(k) if range.contains(&k) => Ok(Some(k)),
            _ => Err(crate::UserError(format!("{name}={v:?}: {what}")).into()),
        },
    }
}

fn adamw_cfg(c: &TrainConfig) -> AdamWConfig {
    AdamWConfig {
        lr: c.lr,
        beta1: c.beta1,
        beta2: c.beta2,
        eps: 1e-8,
        weight_decay: c.weight_decay,
    }
}

impl Engine {
    pub fn new(
        comm: Arc<dyn Communicator>,
        dev: Device,
        c: &TrainConfig,
        vocab: usize,
        o: &crate::trainer::RunOpts,
    ) -> Result<Self> {
        let mut model = TransformerLm::new(c.model.lm_config(vocab)?, c.seed, &dev)?;
        if c.bf16 {
            model.set_compute_dtype(DType::BF16);
        }
        model.set_activation_checkpointing(c.activation_checkpointing);
        if c.activation_checkpointing && comm.rank() == 0 {
            eprintln!("train: activation checkpointing: each block keeps only its input, and runs its forward again right before its backward");
        }
        let bucketed = Strategy::Bucketed { bucket_mb: 25.0 };
        // A bf16 model's gradients are bf16: reduced as they are (in place, no copy), as
        // the single-GPU AdamW reads them. Buckets ready at the same stage go out as one
        // launch (one NCCL group).
        let wire = |s: Strategy| DdpOptions {
            grad_dtype: c.bf16.then_some(DType::BF16),
            coalesce: true,
            // The ranks' batches are equal shares of the global batch (check_split).
            gather_rows: true,
            ..DdpOptions::new(s)
        };
        // The table of `--strategy` names: each builds its plug-in (step::Strategy).
        let strategy: Box<dyn step::Strategy> = match (
            c.strategy.as_str(),
            crate::config::zero_buckets(&c.strategy)?,
        ) {
            ("single", _) => Box::new(step::Local),
            (_, Some((stage, b))) => {
                let o = DdpOptions {
                    release_gradients: stage >= 2,
                    ..wire(b)
                };
                let mut z = Zero1Overlap::new(comm.clone(), &model, o, adamw_cfg(c))?;
                z.set_gather_ahead(true);
                z.set_fsdp(stage == 3);
                let (keep_last, depth) = fsdp_gathers()?;
                z.set_fsdp_gathers(keep_last, depth)?;
                if let Some(unit) = fsdp_unit()? {
                    z.set_fsdp_unit(unit)?;
                }
                Box::new(z)
            }
            ("sharded", _) if dev.is_cuda() => {
                // Its first GPU run (session 16, device call 80) stopped on an illegal
                // memory access; until that is found, a clear refusal instead of a crash.
                return Err(crate::UserError(
                    "--strategy sharded: not on CUDA devices in this version (its first GPU run failed with an illegal memory access, not yet explained); --strategy zero1 shards the optimizer state too, and runs as one CUDA graph".into(),
                )
                .into());
            }
            ("sharded", _) => {
                let g = ParamGroup {
                    params: model.params().vars().to_vec(),
                    cfg: adamw_cfg(c),
                };
                let d = Ddp::new(comm.clone(), &model, DdpOptions::new(bucketed))?;
                let o = ShardedOptimizer::new(comm.clone(), vec![g])?;
                Box::new(zero1::Sharded::new(d, o))
            }
            (s, None) => {
                let o = DdpOptions {
                    split: ddp::split::from_env(comm.as_ref())?,
                    ..wire(s.parse()?)
                };
                Box::new(Ddp::new(comm.clone(), &model, o)?)
            }
        };
        let opts = StepOptions {
            clip: c.clip,
            adamw: AdamwPlace::Auto,
            graph: !o.eager,
            fp32_simt: !c.bf16 && !model::tf32::tf32(),
            skip_nonfinite: o.skip_nonfinite > 0,
            ..StepOptions::default()
        };
        let mut step = TrainStep::new(&model, strategy, adamw_cfg(c), opts)?;
        // A signal on any rank stops every rank after the same step (a checkpoint first).
        step.enable_stop()?;
        Ok(Self {
            comm,
            dev,
            model,
            step,
        })
    }

    /// ZeRO's sharded f32 masters (zero1 and zero2 above one rank on GPUs, unless
    /// `ZERO1_MASTERS=whole`; fsdp always): the model drops the whole masters whose parts
    /// its strategy keeps.
    /// After the resume and the initial export, which read whole masters.
    pub fn release_masters(&mut self) -> Result<()> {
        if !sharded_masters()? && !self.fsdp() {
            return Ok(());
        }
        let n = self.step.release_masters(self.model.params_mut())?;
        if self.comm.rank() == 0 {
            match (n, self.fsdp()) {
                (0, true) => eprintln!("train: --strategy fsdp: nothing to shard here (a bf16 model on CUDA above one rank has bf16 copies to shard): it runs as zero2"),
                (0, false) => {}
                (n, true) => {
                    let unit = self.step.strategy_as::<Zero1Overlap>().and_then(|z| z.fsdp_unit_used()).unwrap_or(1);
                    eprintln!("train: fsdp: each rank keeps its part of {n} parameters' f32 masters, gathered {unit} stage(s) at a time in bf16 (FSDP_UNIT sets it; every rank samples at the end)")
                }
                (n, false) => eprintln!("train: f32 masters sharded: each rank keeps its part of {n} parameters' masters (ZERO1_MASTERS=whole keeps them whole)"),
            }
            if n > 0 && self.comm.backend() == "nccl" {
                eprintln!("train: {}", comm::nccl::windows_note());
            }
        }
        Ok(())
    }

    /// Whether every rank samples together after training: where FSDP sharded the bf16
    /// copies, the model's weights are whole only stage by stage, each stage gathered by
    /// every rank ([`Self::before_sample_stage`]).
    pub fn samples_together(&self) -> bool {
        let z = self.step.strategy_as::<Zero1Overlap>();
        z.is_some_and(|z| z.copies_sharded())
    }

    /// Before stage `s` of a sampling forward: FSDP's gather of its weights (nothing
    /// elsewhere).
    pub fn before_sample_stage(&self, s: usize) -> Result<()> {
        let z = self.step.strategy_as::<Zero1Overlap>();
        match z.filter(|z| z.copies_sharded()) {
            Some(z) => Ok(z.before_stage(s)?),
            None => Ok(()),
        }
    }

    /// Whether the strategy is FSDP (`--strategy fsdp`: the model's weights are whole only
    /// stage by stage, inside the step and validation).
    pub fn fsdp(&self) -> bool {
        self.step
            .strategy_as::<Zero1Overlap>()
            .is_some_and(|z| z.fsdp())
    }

    /// Queues one optimizer step at learning rate `lr` on this rank's micro-batches (host
    /// tensors) and returns the previous step's loss and norm (read while this one runs).
    pub fn step(&mut self, micro: &[Batch], lr: f64) -> Result<Option<StepOut>> {
        self.step.step(&self.model, micro, lr)
    }

    /// Asks every rank to stop: a later step's values say so on every rank.
    pub fn request_stop(&mut self) -> Result<()> {
        self.step.request_stop()
    }

    /// Asks every rank to checkpoint at the same step (`StepOut::checkpoint`).
    pub fn request_checkpoint(&mut self) -> Result<()> {
        self.step.request_checkpoint()
    }

    pub fn checkpoint_done(&mut self) {
        self.step.checkpoint_done()
    }

    /// The last queued step's values (waits for the device).
    pub fn flush(&mut self) -> Result<Option<StepOut>> {
        self.step.flush()
    }

    /// How the step runs: "graph" or "eager (why)", and where AdamW runs.
    pub fn describe(&self) -> String {
        let g = match (self.step.graph_status(), self.step.graph_kernels()) {
            // Its allocations' most bytes live at once, beside the graph memory the peak
            // line reports (`seam::graph::GraphAllocs`).
            (Ok(()), Some(k)) => match self.step.graph_allocs().filter(|a| a.count > 0) {
                Some(a) => {
                    let gib = |b: u64| seam::memory::gib(Some(b)).unwrap_or(0.0);
                    format!(
                        "one CUDA graph of {k} kernels and {} allocations (at most {:.2} GiB live at once in capture order, {:.2} GiB never freed in it)",
                        a.count,
                        gib(a.live_peak),
                        gib(a.unfreed)
                    )
                }
                None => format!("one CUDA graph of {k} kernels"),
            },
            (Ok(()), None) => "one CUDA graph".to_string(),
            (Err(why), _) => format!("eager ({why})"),
        };
        let eval = match self.step.eval_graph_status() {
            Some(Ok(())) => "; validation: one CUDA graph".to_string(),
            Some(Err(why)) => format!("; validation: eager ({why})"),
            None => String::new(),
        };
        let norm = match self.step.norm_taken() {
            Some(n) => format!("; norm {}", n.name()),
            None => String::new(),
        };
        let adamw = self.step.adamw_place().name();
        // Which NCCL the step's collectives run on, where they run on one.
        let nccl = match comm::nccl::loaded_version() {
            Some(v) if self.comm.backend() == "nccl" && self.comm.world_size() > 1 => {
                format!("; NCCL {v}")
            }
            _ => String::new(),
        };
        format!("step: {g}; AdamW {adamw}{norm}{eval}{nccl}")
    }

    /// The mean of `x` over the ranks.
    fn mean(&self, x: f64) -> Result<f64> {
        if self.comm.world_size() == 1 {
            return Ok(x);
        }
        let t = candle_core::Tensor::new(&[x], &self.dev)?;
        self.comm.all_reduce(&t, ReduceOp::Avg)?;
        Ok(t.to_device(&Device::Cpu)?.to_vec1::<f64>()?[0])
    }

    /// Mean loss over `batches` (this rank's parts of the validation batches, host tensors),
    /// over ranks: through the step's captured forward, one read per evaluation.
    pub fn eval_loss(&mut self, batches: &[Batch]) -> Result<f64> {
        let l = self.step.eval_loss(&self.model, batches)?;
        self.mean(l)
    }

    /// The directory holding the checkpoint's manifest inside a step directory.
    pub fn manifest_dir(&self, dir: &Path) -> PathBuf {
        self.step.manifest_dir(dir)
    }

    /// Saves weights and optimizer state (collective).
    pub fn save(&mut self, dir: &Path) -> Result<()> {
        self.step.save(&self.model, dir, &self.comm)
    }

    /// Loads weights and optimizer state (collective); returns the optimizer's step count.
    pub fn resume(&mut self, dir: &Path) -> Result<u64> {
        self.step.resume(&self.model, dir, &self.comm)
    }
}

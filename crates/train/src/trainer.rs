//! One rank's training run: data, engine, resume, the step loop (schedule, micro-batches,
//! clipping), evaluation, checkpoints, the log, and at the end the loss curve and samples.

use crate::config::TrainConfig;
use crate::data::Dataset;
use crate::engine::Engine;
use crate::generate::{self, SampleOpts};
use crate::log::{self, Log, Record};
use crate::sampler::{shard, Sampler};
use crate::{export, schedule, state};
use anyhow::{bail, Context, Result};
use candle_core::Device;
use comm::Communicator;
use indicatif::{ProgressBar, ProgressStyle};
use seam::Batch;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// The validation windows' seed offset: fixed windows, the same at every evaluation.
const EVAL_SEED: u64 = 0x5EED_E7A1;

/// How a run is carried out (not part of its trajectory).
#[derive(Debug, Clone)]
pub struct RunOpts {
    pub data: PathBuf,
    pub out: PathBuf,
    pub ckpt_every: crate::cadence::Cadence,
    pub keep: usize,
    /// Resume from the newest complete checkpoint in `out/checkpoints` if there is one.
    pub resume: bool,
    /// Stop (as if killed) after this many steps, without a final checkpoint.
    pub stop_after: Option<u64>,
    pub progress: bool,
    pub samples: Option<SampleOpts>,
    /// Write the initial weights to `out/init.safetensors` (a fresh run only).
    pub export_init: bool,
    /// Skip up to this many steps in a row whose loss or gradient norm is not finite
    /// (AdamW writes nothing for them; logged as `skipped`); 0: stop at the first.
    pub skip_nonfinite: u64,
    /// Another run's GEMM algorithm table to compute with ([`crate::gemm_table`]); `None`:
    /// the run directory's own where it has one.
    pub gemm_choices: Option<PathBuf>,
    /// Every step eagerly, never captured as a CUDA graph: slower; what a graph's steps are
    /// checked against (`train run --eager`).
    pub eager: bool,
}

impl Clone for SampleOpts {
    fn clone(&self) -> Self {
        Self {
            max_new: self.max_new,
            temperature: self.temperature,
            top_k: self.top_k,
        }
    }
}
impl std::fmt::Debug for SampleOpts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SampleOpts({}, {}, {})",
            self.max_new, self.temperature, self.top_k
        )
    }
}

/// What a finished run reports (rank 0's view; the losses are means over the ranks).
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub steps: u64,
    pub resumed_from: u64,
    /// The last step's loss and the last validation loss of this run; `None` where this
    /// run measured none (nothing trained, or no evaluation before a stop).
    pub final_train_loss: Option<f64>,
    /// (step, loss) of the last validation.
    pub final_val: Option<(u64, f64)>,
    pub unigram_entropy: f64,
    pub seconds: f64,
    pub tokens_per_s: f64,
    /// Logged training steps and their tokens/s, in order: the first ones of the run
    /// and the latest ones ([`Summary::record_rate`] bounds it).
    pub step_tokens_per_s: Vec<(u64, f64)>,
    /// What turns tokens/s into MFU (`train::mfu`); `None` where there is none.
    pub mfu: Option<crate::mfu::Mfu>,
    pub samples: Vec<(String, String)>,
    /// Steps skipped for a non-finite loss or norm (`--skip-nonfinite`), and how many of
    /// the last ones in a row.
    pub skipped: u64,
    pub skipped_in_a_row: u64,
}

fn eval_batches(
    ds: &Dataset,
    c: &TrainConfig,
    rank: usize,
    world: usize,
    dev: &Device,
) -> Result<Vec<Batch>> {
    let s = Sampler::new(&ds.val, c.model.context, c.seed ^ EVAL_SEED)?;
    let rows = c.global_batch / c.accum;
    (0..c.eval_batches)
        .map(|j| s.batch(&ds.val, j as u64, shard(rows, world, 1, rank, 0), dev))
        .collect()
}

pub fn run_rank(
    c: &TrainConfig,
    o: &RunOpts,
    comm: Arc<dyn Communicator>,
    dev: Device,
) -> Result<Summary> {
    let (rank, world) = (comm.rank(), comm.world_size());
    crate::users(c.validate(world))?;
    let _lock = crate::rundir::claim(rank, &o.out, !o.resume)?;
    // Data the run cannot use, or a run that cannot fit: the user's to change.
    let ds = crate::users(Dataset::open(&o.data))?;
    let data_id = state::DataId::of(&ds)?;
    let sampler = crate::users(Sampler::new(&ds.train, c.model.context, c.seed))?;
    // The memory check comes before the first batch is sampled: a batch the host cannot
    // hold is refused by name, not aborted on in its allocation.
    let vocab = ds.meta.vocab_size;
    crate::users(crate::preflight::fits(c, vocab, world, &dev, !o.eager))?;
    let val = crate::users(eval_batches(&ds, c, rank, world, &dev))?;
    let from = o.gemm_choices.as_deref();
    if let Some(m) = crate::gemm_table::load(&o.out, rank, from, &dev)? {
        if rank == 0 {
            eprintln!("train: {m}");
        }
    }
    let mut gemm_saved = 0;
    let mut e = Engine::new(comm, dev.clone(), c, ds.meta.vocab_size, o)?;
    let ckpts = o.out.join("checkpoints");
    if rank == 0 {
        std::fs::create_dir_all(&ckpts).with_context(|| format!("creating {}", ckpts.display()))?;
    }
    e.comm.barrier()?;
    state::check_names(&ckpts)?;
    let (start, run_id) = match o.resume {
        true => state::resume(&mut e, &ckpts, c, &data_id)?,
        false => (0, None),
    };
    let run_id = run_id.unwrap_or_else(state::new_run_id);
    if o.export_init && start > 0 {
        bail!(
            "cannot export the initial weights: the run resumes from step {start} in {} (start afresh with --fresh)",
            ckpts.display()
        );
    }
    if rank == 0 {
        // What a crash can cost, before anything is at stake (a launcher with
        // --max-restarts resumes from the newest checkpoint).
        eprintln!("train: {}", o.ckpt_every.describe(c.steps));
        for w in c.warnings() {
            eprintln!("train: warning: {w}");
        }
        export::config(&o.out, c, &run_id)?;
        if o.export_init {
            export::weights(&e.model, &o.out.join(export::INIT_FILE))?;
        }
    }
    // The pool's mark before any gather buffer in NCCL windows (comm::nccl::window_bytes):
    // release_masters makes them as it ends, once the whole masters are gone. The peaks
    // after it count them (summary::peak_line).
    let before = seam::memory::peak(&dev);
    seam::memory::reset_peak(&dev);
    e.release_masters()?; // after the resume and the export: they read whole masters
    let before_windows = seam::memory::peak(&dev).max(before);
    seam::memory::reset_peak(&dev);
    let mut log = if rank == 0 {
        Some(Log::open(&o.out.join("log.jsonl"), start)?)
    } else {
        None
    };
    let push = |log: &mut Option<Log>, r: Record| log.as_mut().map_or(Ok(()), |l| l.push(r));
    let first_val = if start == 0 {
        let v = e.eval_loss(&val)?;
        push(&mut log, Record::Val { step: 0, loss: v })?;
        Some((0, v))
    } else {
        None
    };
    let end = o.stop_after.map_or(c.steps, |s| s.min(c.steps));
    let bar = if rank == 0 && o.progress {
        ProgressBar::new(c.steps)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(ProgressStyle::with_template(
        "{bar:30} {pos}/{len} {msg} [{elapsed_precise} < {eta_precise}]",
    )?);
    bar.set_position(start);
    let tokens_per_step = (c.global_batch * c.model.context) as f64;
    let mfu = crate::mfu::Mfu::of(&c.model, c.bf16, vocab, world, &dev)?;
    let t0 = Instant::now();
    let mut s = Summary {
        resumed_from: start,
        final_val: first_val,
        unigram_entropy: ds.meta.unigram_entropy,
        ..Summary::default()
    };
    // The step's values come back one step late (read while the next step runs): a
    // step's record is written when they arrive, and before any evaluation, checkpoint
    // or the end, the pending step is flushed.
    let mut queued: Option<(u64, f64)> = None;
    let mut tick = Instant::now();
    let emit = |log: &mut Option<Log>,
                s: &mut Summary,
                tick: &mut Instant,
                (done, lr): (u64, f64),
                out: step::StepOut|
     -> Result<()> {
        let finite = out.loss.is_finite() && out.grad_norm.is_none_or(f64::is_finite);
        if finite {
            s.skipped_in_a_row = 0;
        } else if s.skipped_in_a_row < o.skip_nonfinite {
            s.skipped += 1;
            s.skipped_in_a_row += 1;
            let (l, n) = (out.loss, out.grad_norm.unwrap_or(f64::NAN));
            bar.suspend(|| {
                eprintln!(
                    "train: step {done}: loss {l}, gradient norm {n}: skipped ({} in a row, --skip-nonfinite {})",
                    s.skipped_in_a_row, o.skip_nonfinite
                )
            });
            return push(log, Record::Skipped { step: done, lr });
        }
        state::diverged(&ckpts, done, "loss", out.loss)?;
        if let Some(n) = out.grad_norm {
            state::diverged(&ckpts, done, "gradient norm", n)?;
        }
        // The step's own time (the device's clock on a GPU: `StepOut::seconds`); the
        // first step of a run has none, and takes the host's since the loop began.
        let seconds = out.seconds.unwrap_or_else(|| tick.elapsed().as_secs_f64());
        *tick = Instant::now();
        let tps = tokens_per_step / seconds.max(1e-9);
        s.record_rate(done, tps);
        s.final_train_loss = Some(out.loss);
        push(
            log,
            Record::Train {
                step: done,
                loss: out.loss,
                lr,
                grad_norm: out.grad_norm,
                tokens_per_s: tps,
                elapsed_s: t0.elapsed().as_secs_f64(),
                mfu: mfu.as_ref().map(|m| m.at(tps)),
            },
        )?;
        let util = match &mfu {
            Some(m) => format!(" | MFU {:.1}%", 100.0 * m.at(tps)),
            None => String::new(),
        };
        bar.set_message(format!("loss {:.4} | {:.0} tok/s{util}", out.loss, tps));
        bar.set_position(done);
        Ok(())
    };
    let mut asked = false;
    let mut clock = crate::cadence::Clock::new(o.ckpt_every);
    // (stop, checkpoint) agreed in a step whose values a flush read (every rank flushes
    // at the same steps): acted on after the next step.
    let mut carried = (false, false);
    // The process's peak GPU memory over the first (eager) step, where it has one.
    let mut first_peak: Option<u64> = None;
    for step in start..end {
        // SIGTERM/SIGINT/SIGHUP (a preemption notice, forwarded by the launcher): asked
        // here, agreed by every rank through the steps' values.
        if !asked && comm::launch::signals::pending().is_some() {
            e.request_stop()?;
            asked = true;
        }
        if clock.due() {
            e.request_checkpoint()?; // every rank checkpoints at the agreed step
        }
        let lr = schedule::lr(c, step);
        // Host tensors: the step uploads them through pinned memory.
        let micro = (0..c.accum)
            .map(|m| {
                sampler.batch(
                    &ds.train,
                    step,
                    shard(c.global_batch, world, c.accum, rank, m),
                    &Device::Cpu,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        let prev = e.step(&micro, lr)?;
        let done = step + 1;
        crate::fault::kill_if_asked(rank, done);
        if step == start + 1 {
            // After the second step: the first is eager (its GEMMs timed; its peak kept apart
            // for summary::peak_line), the second captured (or not).
            first_peak = seam::memory::process_peak(&dev);
            seam::memory::reset_peak(&dev);
            if rank == 0 {
                bar.suspend(|| eprintln!("train: {}", e.describe()));
            }
        }
        // Every rank reads the same step's flag here: all stop after step `done`.
        let stop_now = std::mem::take(&mut carried.0) || prev.as_ref().is_some_and(|o| o.stop);
        let agreed = std::mem::take(&mut carried.1) || prev.as_ref().is_some_and(|o| o.checkpoint);
        if let (Some(out), Some(q)) = (prev, queued.replace((done, lr))) {
            emit(&mut log, &mut s, &mut tick, q, out)?;
        }
        let eval_now = !stop_now && (done % c.eval_every == 0 || done == c.steps);
        let ckpt_now = agreed || o.ckpt_every.by_steps(done) || done == c.steps;
        if eval_now || ckpt_now || done == end {
            if let (Some(out), Some(q)) = (e.flush()?, queued.take()) {
                carried = (out.stop, out.checkpoint && !ckpt_now);
                emit(&mut log, &mut s, &mut tick, q, out)?;
            }
        }
        if eval_now {
            let v = e.eval_loss(&val)?;
            state::diverged(&ckpts, done, "validation loss", v)?;
            s.final_val = Some((done, v));
            push(
                &mut log,
                Record::Val {
                    step: done,
                    loss: v,
                },
            )?;
            if rank == 0 && o.progress {
                bar.println(format!(
                    "step {done}: train {:.4}, validation {v:.4} (unigram entropy {:.4})",
                    s.final_train_loss.unwrap_or(f64::NAN),
                    ds.meta.unigram_entropy
                ));
            }
        }
        if ckpt_now {
            gemm_saved = crate::gemm_table::save(&o.out, rank, &dev, gemm_saved)?;
            let saved = state::save(&mut e, &ckpts, done, (c, &data_id, &run_id), o.keep)?;
            if rank == 0 {
                bar.suspend(|| eprintln!("train: {saved}"));
            }
            clock.saved();
            e.checkpoint_done();
        }
        if stop_now {
            bar.finish_and_clear();
            let signal = comm::launch::signals::pending().unwrap_or(15);
            return Err(crate::Stopped { signal, step: done }.into());
        }
        if eval_now || ckpt_now {
            tick = Instant::now();
        }
    }
    bar.finish_and_clear();
    if let Some(line) = crate::summary::peak_line(before_windows, first_peak, &dev) {
        eprintln!("{line}"); // every rank's own: a launcher prefixes it with the rank
    }
    crate::gemm_table::save(&o.out, rank, &dev, gemm_saved)?;
    s.steps = end.max(start);
    s.seconds = t0.elapsed().as_secs_f64();
    s.tokens_per_s = tokens_per_step * end.saturating_sub(start) as f64 / s.seconds.max(1e-9);
    s.mfu = mfu;
    if let Some(log) = &log {
        let (t, v) = log.series();
        let title = format!(
            "{} ({} ranks, {})",
            c.strategy,
            world,
            if c.bf16 { "bf16" } else { "fp32" }
        );
        log::plot(
            &o.out.join("loss.svg"),
            &t,
            &v,
            ds.meta.unigram_entropy,
            &title,
        )?;
    }
    // Rank 0 samples; under FSDP every rank does, with the same generator (each stage's
    // weights are gathered by all), and rank 0 writes.
    let sampling = rank == 0 || e.samples_together();
    if let (true, Some(so), true) = (sampling, &o.samples, end == c.steps) {
        let (m, tok, eot) = (&e.model, &ds.tokenizer, ds.meta.eot);
        s.samples = generate::samples(m, tok, eot, so, c.seed, &dev, |s| e.before_sample_stage(s))?;
        if rank == 0 {
            let text: String = s
                .samples
                .iter()
                .map(|(p, c)| format!("{p}{c}\n\n"))
                .collect();
            checkpoint::write_atomic(&o.out.join("samples.txt"), text.as_bytes())?;
        }
    }
    Ok(s)
}

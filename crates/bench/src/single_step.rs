//! `bench single --mode step`: the training step users run (`step::TrainStep`, the one
//! `train` runs) on a fixed batch, timed back to back as a training loop queues it (a CUDA
//! event between steps, read at the end; the loss read one step late, as `train` does).

use crate::memory;
use crate::single::{step_flops, Mode, Precision, SingleRecord};
use crate::step_timing::time_steps;
use crate::timer::mean_std;
use anyhow::Result;
use candle_core::Device;
use model::AdamWConfig;
use step::{AdamwPlace, StepOptions, TrainStep};

/// The step's options from `bench single`'s flags.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct StepFlags {
    /// The whole step (forward, backward, AdamW) as one CUDA graph: captured after the
    /// first eager warm-up step and replayed from then on (at least one untimed
    /// replay); falls back to eager steps with the reason if capture fails. CUDA only,
    /// step and fwd-bwd modes; `--graph false` for eager steps.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub graph: bool,
    /// Where AdamW runs in step mode: after the backward; stage by stage inside it
    /// (in-backward: each stage's gradients freed once applied); so on a second CUDA
    /// stream beside the backward (side-stream); or auto: side-stream for fp32 on
    /// CUDA without TF32, in-backward otherwise. Inside the backward only without
    /// clipping; records name the place that ran.
    #[arg(long, value_enum, default_value = "auto")]
    pub adamw: AdamwPlace,
    /// side-stream: at most this many blocks per update kernel (0: the kernel's full
    /// grid); fewer leave the SMs to the backward's GEMMs. The default, as `train`'s
    /// (`step::ADAMW_SIDE_BLOCKS`, two an SM), measured best for fp32 (nvidia-h200).
    #[arg(long, default_value_t = step::ADAMW_SIDE_BLOCKS)]
    pub side_blocks: u32,
    /// side-stream: free a stage's gradients this many stages after its updates.
    #[arg(long, default_value_t = model::in_backward::LAG, value_parser = crate::cli::at_least_1)]
    pub side_lag: usize,
    /// Step mode: clip the gradients to this global norm, as `train` does (0: off; AdamW
    /// then may run inside the backward).
    #[arg(long, default_value_t = 0.0)]
    pub clip: f64,
    /// The LM's vocabulary (default: the size's, 10,000). run.sh train-speed gives its
    /// data's, so that `bench single` and `train run` time the same model.
    #[arg(long, value_parser = crate::cli::at_least_1)]
    pub vocab: Option<usize>,
}

#[allow(clippy::too_many_arguments)]
pub fn run(
    size: &str,
    dtype: Precision,
    warmup: usize,
    steps: usize,
    batch: usize,
    device: &Device,
    peak_tflops: Option<f64>,
    f: StepFlags,
) -> Result<SingleRecord> {
    // A host batch, as `train` gives it: the step uploads it through pinned memory.
    let (cfg, lm, b) = crate::single::setup(size, dtype, batch, device, &Device::Cpu, f.vocab)?;
    let seq = cfg.context;
    let b = vec![b];
    let opts = StepOptions {
        clip: f.clip,
        adamw: f.adamw,
        norm: step::NormPlace::default(),
        skip_nonfinite: false,
        graph: f.graph,
        fp32_simt: dtype == Precision::Fp32 && !model::tf32::tf32(),
        side_blocks: f.side_blocks,
        side_lag: f.side_lag,
    };
    let adamw = AdamWConfig {
        lr: 1e-4,
        ..AdamWConfig::default()
    };
    let mut st = TrainStep::new(&lm, Box::new(step::Local), adamw, opts)?;
    let run = time_steps(&mut st, &lm, &b, adamw.lr, (warmup, steps), device)?;
    let (total, losses, gpu) = (run.ms, run.losses, run.telemetry);
    let peak_step = run.peak_bytes;
    let (graph, fallback) = match st.graph_status() {
        Ok(()) => (true, None),
        Err(why) if f.graph && device.is_cuda() => (false, Some(why)),
        Err(_) => (false, None),
    };
    let kernels = st.graph_kernels();
    let place = st.adamw_place();
    let norm = st.norm_taken();
    let side = st.side().map(|s| (s.max_blocks(), s.lag()));
    drop(st);
    let step_ms = mean_std(&total);
    let zero = vec![0.0; total.len()];
    Ok(SingleRecord {
        bench: "single".into(),
        size: size.into(),
        dtype,
        mode: Mode::Step,
        params: cfg.param_count(),
        vocab: cfg.vocab,
        batch,
        seq,
        steps,
        fwd_ms: if graph { step_ms } else { (0.0, 0.0) },
        bwd_ms: mean_std(&zero),
        opt_ms: mean_std(&zero),
        step_ms,
        step_median_ms: Some(crate::timer::median(&total)),
        tokens_per_s: (batch * seq) as f64 / (step_ms.0 / 1e3),
        mfu: peak_tflops.map(|p| step_flops(&cfg, batch, seq) / (step_ms.0 / 1e3) / (p * 1e12)),
        peak_fwd_gib: None,
        peak_step_gib: memory::gib(peak_step),
        loss_first: losses.first().copied().unwrap_or(f32::NAN),
        loss_last: losses.last().copied().unwrap_or(f32::NAN),
        tf32: model::tf32::tf32(),
        graph,
        graph_fallback: fallback,
        graph_kernels: kernels,
        adamw: place,
        norm,
        side_blocks: side.and_then(|s| s.0),
        side_lag: side.map(|s| s.1),
        gpu,
    })
}

/// `--gemm-choices`: the process computes with `path`'s table (refused, naming it, where it
/// is not one or holds for another GPU or cuBLASLt); `--save-gemm-choices` (`save`) is
/// refused up front off CUDA.
pub fn gemm_table_in(
    path: Option<&std::path::Path>,
    save: Option<&std::path::Path>,
    dev: &Device,
) -> Result<()> {
    if let (Some(s), None) = (save, model::gemm::identity(dev)?) {
        anyhow::bail!(
            "--save-gemm-choices {}: no GEMM table off CUDA",
            s.display()
        );
    }
    let Some(path) = path else { return Ok(()) };
    let t = match model::gemm::Table::apply_file(path, dev)? {
        Ok(t) => t,
        Err(why) => anyhow::bail!("--gemm-choices {}: {why}", path.display()),
    };
    eprintln!(
        "bench single: GEMM algorithms: {} shapes from {}",
        t.choices.len(),
        path.display()
    );
    Ok(())
}

/// `--save-gemm-choices`: the process's table written to `path` (off CUDA: refused).
pub fn gemm_table_out(path: Option<&std::path::Path>, dev: &Device) -> Result<()> {
    let Some(path) = path else { return Ok(()) };
    let Some(t) = model::gemm::Table::current(dev)? else {
        anyhow::bail!(
            "--save-gemm-choices {}: no GEMM table off CUDA",
            path.display()
        );
    };
    std::fs::write(path, t.to_json())
        .map_err(|e| anyhow::anyhow!("--save-gemm-choices {}: {e}", path.display()))
}

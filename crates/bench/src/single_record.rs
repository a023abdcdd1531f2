//! What `bench single` records per run (one JSON line each, read back by the report) and
//! the fixed-column table row it prints.

use crate::telemetry::GpuTelemetry;
use serde::{Deserialize, Serialize};
use step::AdamwPlace;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Fp32,
    Bf16,
}

impl Precision {
    /// The name used in records and tables ("fp32", "bf16").
    pub fn name(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Bf16 => "bf16",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    Fwd,
    /// Forward and backward, no optimizer: the bf16 weight copies are written once before
    /// the steps and read by every forward, as in a training step (where AdamW writes them).
    FwdBwd,
    Step,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SingleRecord {
    pub bench: String, // "single"
    pub size: String,
    pub dtype: Precision,
    pub mode: Mode,
    pub params: usize,
    /// The LM's vocabulary (older records: the sizes' default, model::VOCAB).
    #[serde(default = "default_vocab")]
    pub vocab: usize,
    pub batch: usize,
    pub seq: usize,
    pub steps: usize,
    pub fwd_ms: (f64, f64),
    pub bwd_ms: (f64, f64),
    pub opt_ms: (f64, f64),
    /// Whole step, mean and standard deviation.
    pub step_ms: (f64, f64),
    /// Whole step, median of the timed steps (`train run`'s statistic; older records: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_median_ms: Option<f64>,
    pub tokens_per_s: f64,
    pub mfu: Option<f64>,
    pub peak_fwd_gib: Option<f64>,
    pub peak_step_gib: Option<f64>,
    pub loss_first: f32,
    pub loss_last: f32,
    /// The step replayed as one CUDA graph: `fwd_ms` holds the whole replay (forward,
    /// backward and, in step mode, AdamW); `bwd_ms` and `opt_ms` are 0.
    #[serde(default)]
    pub graph: bool,
    /// Why graph mode fell back to eager steps, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph_fallback: Option<String>,
    /// Kernel launches in one replay (graph mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph_kernels: Option<usize>,
    /// fp32 GEMMs on TF32 tensor cores (`bench single --tf32`, model::tf32).
    #[serde(default)]
    pub tf32: bool,
    /// Where AdamW ran (step mode; `after` in the other modes and in older records).
    #[serde(default)]
    pub adamw: AdamwPlace,
    /// Where a clipping step took the gradient norm (`None`: no clipping, or older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub norm: Option<step::NormPlace>,
    /// side-stream: the update kernels' block cap (`None`: their full grid) and the lag,
    /// in stages, before a stage's gradients are freed (model::SideStream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side_blocks: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side_lag: Option<usize>,
    /// The GPU's SM clock and power over the timed steps (NVML; `None` on the CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuTelemetry>,
}

fn default_vocab() -> usize {
    model::VOCAB
}

impl SingleRecord {
    /// ", AdamW in backward" and the like, for tables; empty when AdamW ran after it.
    pub fn adamw_place(&self) -> &'static str {
        match (self.adamw, self.norm) {
            (_, Some(_)) => ", clipping (AdamW after the norm)",
            (AdamwPlace::After | AdamwPlace::Auto, None) => "",
            (AdamwPlace::InBackward, None) => ", AdamW in backward",
            (AdamwPlace::SideStream, None) => ", AdamW in backward on a 2nd stream",
        }
    }

    /// "fp32", "bf16", or "fp32 tf32" when fp32 GEMMs ran on TF32.
    pub fn math(&self) -> String {
        match (self.dtype, self.tf32) {
            (Precision::Fp32, true) => "fp32 tf32".into(),
            (d, _) => d.name().into(),
        }
    }
}

pub fn header() -> String {
    format!(
        "{:>6} {:>9} {:>8} {:>14} {:>14} {:>14} {:>14} {:>10} {:>6} {:>9} {:>9}  {}",
        "size",
        "dtype",
        "mode",
        "fwd(ms)",
        "bwd(ms)",
        "opt(ms)",
        "step(ms)",
        "tok/s",
        "MFU",
        "peakF(GiB)",
        "peakS(GiB)",
        "gpu"
    )
}

pub fn row(r: &SingleRecord) -> String {
    let ms = |p: (f64, f64)| format!("{:.2}±{:.2}", p.0, p.1);
    let opt =
        |v: Option<f64>, d: usize| v.map(|x| format!("{x:.d$}")).unwrap_or_else(|| "-".into());
    format!(
        "{:>6} {:>9} {:>8} {:>14} {:>14} {:>14} {:>14} {:>10.0} {:>6} {:>9} {:>9}  {}",
        r.size,
        r.math(),
        format!(
            "{:?}{}{}",
            r.mode,
            if r.graph { "+g" } else { "" },
            match r.adamw {
                AdamwPlace::After | AdamwPlace::Auto => "",
                AdamwPlace::InBackward => "+ib",
                AdamwPlace::SideStream => "+ss",
            }
        )
        .to_lowercase(),
        ms(r.fwd_ms),
        ms(r.bwd_ms),
        ms(r.opt_ms),
        ms(r.step_ms),
        r.tokens_per_s,
        opt(r.mfu.map(|m| m * 100.0), 1),
        opt(r.peak_fwd_gib, 2),
        opt(r.peak_step_gib, 2),
        crate::telemetry::cell(r.gpu.as_ref())
    )
}

//! What `bench ddp` records per run (one JSON line each, read back by the report) and the
//! fixed-column table row it prints.

use crate::single::Precision;
use crate::telemetry::{cell, GpuTelemetry};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DdpRecord {
    pub bench: String, // "ddp"
    pub backend: String,
    pub world: usize,
    pub size: String,
    pub dtype: Precision,
    pub strategy: String,
    pub bucket_mb: Option<f64>,
    pub grad_dtype: String,
    pub batch_per_rank: usize,
    pub steps: usize,
    pub collectives: usize,
    pub comm_bytes: usize,
    pub single_ms: f64,
    pub compute_ms: f64,
    pub step_ms: f64,
    pub step_std_ms: f64,
    pub comm_ms: f64,
    pub exposed_ms: f64,
    pub peak_gib: Option<f64>,
    pub loss_last: f32,
    /// Of one extra traced step (`--trace-dir`): compute during communication ÷
    /// communication (HTA's overlap ratio), and that step's time on the event timeline.
    #[serde(default)]
    pub overlap_ratio: Option<f64>,
    #[serde(default)]
    pub traced_step_ms: Option<f64>,
    /// SMs the backward's GEMMs left to NCCL (`--sm-carveout`; 0: none).
    #[serde(default)]
    pub sm_carveout: usize,
    /// Buckets ready at one stage launched as one NCCL group (`--coalesce`); and how many
    /// launches the step made (`collectives` counts each bucket).
    #[serde(default)]
    pub coalesce: bool,
    #[serde(default)]
    pub launches: Option<usize>,
    /// Host milliseconds to queue one step (slowest rank): near `step_ms`, the step is
    /// host-bound.
    #[serde(default)]
    pub host_ms: Option<f64>,
    /// NCCL and comm settings from the environment (`NCCL_MAX_CTAS=4`,
    /// `COMM_CUDA_EVENT_TRACKING=1`), NCCL runs only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl_env: Option<String>,
    /// Rank 0's GPU over the timed DDP steps and over its own 1-GPU steps (`single_ms`):
    /// SM clock, power, how often the power limit held the clock back (NVML).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuTelemetry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub single_gpu: Option<GpuTelemetry>,
    /// Whether the DDP step ran as one CUDA graph (absent in records from before
    /// `TrainStep`), and why not where it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph_fallback: Option<String>,
    /// Where the DDP step ran AdamW ("after", "in-backward", "side-stream"; absent in
    /// records before session 10, which ran it after).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adamw: Option<String>,
}

pub fn header() -> String {
    format!(
        "{:>5} {:>5} {:>2} {:>14} {:>5} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7} {:>8} {:>7} {:>8}  {}",
        "size",
        "dtype",
        "w",
        "strategy",
        "grads",
        "colls",
        "1gpu(ms)",
        "compute",
        "step(ms)",
        "comm(ms)",
        "exposed",
        "ratio",
        "peak(GiB)",
        "overlap",
        "host(ms)",
        "gpu 0: step | 1-GPU"
    )
}

pub fn row(r: &DdpRecord) -> String {
    let mut s = match r.bucket_mb {
        Some(b) => format!("bucketed:{b}"),
        None => r.strategy.clone(),
    };
    if r.sm_carveout > 0 {
        s += &format!("/c{}", r.sm_carveout);
    }
    if r.coalesce {
        s += "/g";
    }
    format!(
        "{:>5} {:>5} {:>2} {:>14} {:>5} {:>6} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>7.3} {:>8} {:>7} {:>8}  {}",
        r.size,
        r.dtype.name().to_string(),
        r.world,
        s,
        r.grad_dtype,
        r.collectives,
        r.single_ms,
        r.compute_ms,
        r.step_ms,
        r.comm_ms,
        r.exposed_ms,
        r.step_ms / r.single_ms,
        r.peak_gib.map(|g| format!("{g:.1}")).unwrap_or_else(|| "-".into()),
        r.overlap_ratio
            .map(|o| format!("{o:.2}"))
            .unwrap_or_else(|| "-".into()),
        r.host_ms
            .map(|h| format!("{h:.1}"))
            .unwrap_or_else(|| "-".into()),
        match (&r.gpu, &r.single_gpu) {
            (None, None) => "-".into(),
            (g, s) => format!("{} | {}", cell(g.as_ref()), cell(s.as_ref())),
        }
    )
}

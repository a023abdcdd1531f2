//! How much the LM's backward (or, `--phase forward`, its forward: where ZeRO-1's gathers
//! run) slows while other kernels hold some of the GPU's SMs — what NCCL's kernels do
//! beside an overlapped step — and whether planning the GEMMs for the SMs left
//! (`model::gemm_sms`, the carve-out, which cuBLAS and the model's cuBLASLt plans both
//! read) wins it back. One GPU, no NCCL: a "hog" kernel on a second stream takes `hog_sms`
//! SMs for `hog_ms`, starting with the timed pass. The `spin` hog's blocks each ask for all
//! of an SM's shared memory, so no GEMM tile can share that SM, and spin one warp on the
//! global timer with `nanosleep`, so they take almost no issue slots and no memory
//! bandwidth: SM occupancy alone. The `stream` hog's `hog_sms` blocks of 512 threads copy a
//! buffer as fast as they can: SMs plus the HBM traffic a collective's local side makes (it
//! reports the rate, `hog_gbs`). Each pass runs eagerly: at xl, 8 rows, the forward is
//! host-bound and its time moves by several ms from run to run (call 223), so time the
//! forward at 32 rows. Calls 220 and 224 (docs/results/gpus-s40.md): beside either hog no
//! carve-out won time back at xl bf16, backward or forward.
//!
//!   bench contention --size xl --dtype bf16 --phase forward --hog-sms 0,16 --sm-carveout 0,16
//!
//! `lost_per_hog_ms` = (pass − pass alone) ÷ `hog_ms`: the share of the GPU's
//! throughput the pass lost while the SMs were held. If only the held SMs were lost
//! it would be `hog_sms` ÷ SMs; more means GEMMs tiled for every SM ran an extra wave on
//! the SMs left. `bench slowdown` gives the same figure for real NCCL collectives
//! (`lost/comm`).

use crate::single::Precision;
use crate::telemetry::GpuTelemetry;
use crate::timer::{mean_std, Timer};
use anyhow::{bail, Result};
use candle_core::{DType, Device};
use model::{Batch, TransformerLm};
use serde::{Deserialize, Serialize};

#[cfg(feature = "cuda")]
mod hog;
#[cfg(feature = "cuda")]
use hog::Hog;

/// Which pass is timed beside the hog: DDP's collectives run beside the backward, ZeRO's
/// parameter gathers beside the forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Forward,
    #[default]
    Backward,
}

/// What the hog does with the SMs it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum HogKind {
    /// Occupies whole SMs and sleeps.
    Spin,
    /// Copies memory as fast as it can.
    Stream,
}

/// Without the `cuda` feature there is no GPU to hold SMs on.
#[cfg(not(feature = "cuda"))]
struct Hog;

#[cfg(not(feature = "cuda"))]
impl Hog {
    fn new(_: &Device) -> Result<Self> {
        bail!("bench contention needs a CUDA build (--features cuda) and a GPU")
    }
    fn start(&mut self, _: HogKind, _sms: usize, _ms: f64) -> Result<()> {
        Ok(())
    }
    fn finish(&mut self) -> Result<Option<u64>> {
        Ok(None)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContentionRecord {
    pub bench: String, // "contention"
    pub size: String,
    pub dtype: Precision,
    pub batch: usize,
    pub steps: usize,
    pub sms: usize,
    pub hog: HogKind,
    pub hog_sms: usize,
    pub hog_ms: f64,
    /// HBM bytes a `stream` hog read and wrote per second, in GB/s (mean over steps).
    #[serde(default)]
    pub hog_gbs: Option<f64>,
    pub sm_carveout: usize,
    /// The pass timed (records before it have the backward's).
    #[serde(default)]
    pub phase: Phase,
    /// The timed pass (`phase`; the names are the backward's, as before) alone (no hog, no
    /// carve-out) and with this hog and carve-out.
    pub base_bwd_ms: f64,
    pub bwd_ms: f64,
    pub bwd_std_ms: f64,
    pub lost_per_hog_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuTelemetry>,
}

pub struct Config<'a> {
    pub size: &'a str,
    pub dtype: Precision,
    pub hogs: &'a [HogKind],
    pub hog_sms: &'a [usize],
    pub carveouts: &'a [usize],
    pub phase: Phase,
    /// The hog holds its SMs for this share of the timed pass alone.
    pub hog_share: f64,
    pub warmup: usize,
    pub steps: usize,
    pub batch: usize,
}

/// What [`pass_ms`] measured.
struct Timed {
    bwd_ms: Vec<f64>,
    hog_bytes: Vec<u64>,
    gpu: Option<GpuTelemetry>,
}

/// Times `cfg.steps` of `cfg.phase`'s pass (after `cfg.warmup`), each with the hog started
/// with it.
fn pass_ms(
    lm: &TransformerLm,
    b: &Batch,
    dev: &Device,
    cfg: &Config,
    hog: &mut Hog,
    (kind, sms, ms): (HogKind, usize, f64),
) -> Result<Timed> {
    let mut out = Vec::with_capacity(cfg.steps);
    let mut bytes = Vec::new();
    let mut sampler = None;
    for i in 0..cfg.warmup + cfg.steps {
        if i == cfg.warmup {
            sampler = crate::telemetry::Sampler::start(dev);
        }
        // Not step::TrainStep: one pass alone is timed, beside a hog started on the host.
        // The backward's forward runs before the timer; a timed forward's tape is dropped
        // after it.
        let ahead = match cfg.phase {
            Phase::Backward => Some(model::forward(lm, b)?),
            Phase::Forward => None,
        };
        dev.synchronize()?;
        let t = Timer::start(dev)?;
        if sms > 0 {
            hog.start(kind, sms, ms)?;
        }
        let timed = match ahead {
            Some(tape) => {
                drop(tape.backward(|_, _| Ok::<(), model::ModelError>(()))?);
                None
            }
            None => Some(model::forward(lm, b)?),
        };
        let s = t.stop()?;
        drop(timed);
        let moved = hog.finish()?;
        if i >= cfg.warmup {
            out.push(s * 1e3);
            bytes.extend(moved);
        }
    }
    Ok(Timed {
        bwd_ms: out,
        hog_bytes: bytes,
        gpu: sampler.and_then(crate::telemetry::Sampler::stop),
    })
}

pub fn run(dev: &Device, cfg: &Config) -> Result<Vec<ContentionRecord>> {
    if cfg.steps == 0 || cfg.batch == 0 {
        bail!("--steps and --batch must be at least 1");
    }
    if !(cfg.hog_share > 0.0 && cfg.hog_share <= 1.0) {
        bail!("--hog-share {} is not in (0, 1]", cfg.hog_share);
    }
    let mut hog = Hog::new(dev)?;
    let sms = model::gemm_sms::sm_count(dev)?.unwrap_or(0);
    for &n in cfg.hog_sms {
        if n >= sms {
            bail!("--hog-sms {n} would hold every one of the GPU's {sms} SMs");
        }
    }
    for &c in cfg.carveouts {
        model::gemm_sms::check_carveout(dev, c)?;
    }
    let mut lm = TransformerLm::new(crate::ddp::config(cfg.size)?, 0, dev)?;
    if cfg.dtype == Precision::Bf16 {
        lm.set_compute_dtype(DType::BF16);
    }
    let b = crate::ddp::batch_for(&lm, 0, cfg.batch, dev)?;
    let none = (HogKind::Spin, 0, 0.0);
    let base = pass_ms(&lm, &b, dev, cfg, &mut hog, none)?;
    let base = mean_std(&base.bwd_ms).0;
    let hog_ms = base * cfg.hog_share;
    let mut out = Vec::new();
    let runs = cfg.hogs.iter().flat_map(|&k| {
        let sms = cfg
            .hog_sms
            .iter()
            .filter(move |&&h| h > 0 || k == cfg.hogs[0]);
        sms.flat_map(move |&h| cfg.carveouts.iter().map(move |&c| (k, h, c)))
    });
    for (kind, h, c) in runs {
        model::gemm_sms::set_gemm_sm_carveout(dev, c)?;
        let run = pass_ms(&lm, &b, dev, cfg, &mut hog, (kind, h, hog_ms));
        model::gemm_sms::set_gemm_sm_carveout(dev, 0)?;
        let t = run?;
        let (m, sd) = mean_std(&t.bwd_ms);
        let gbs = (!t.hog_bytes.is_empty()).then(|| {
            let mean = t.hog_bytes.iter().sum::<u64>() as f64 / t.hog_bytes.len() as f64;
            mean / (hog_ms / 1e3) / 1e9
        });
        out.push(ContentionRecord {
            bench: "contention".into(),
            size: cfg.size.into(),
            dtype: cfg.dtype,
            batch: cfg.batch,
            steps: cfg.steps,
            sms,
            hog: kind,
            hog_sms: h,
            hog_ms: if h > 0 { hog_ms } else { 0.0 },
            hog_gbs: gbs,
            sm_carveout: c,
            phase: cfg.phase,
            base_bwd_ms: base,
            bwd_ms: m,
            bwd_std_ms: sd,
            lost_per_hog_ms: (h > 0).then(|| (m - base) / hog_ms),
            gpu: t.gpu,
        });
    }
    Ok(out)
}

pub fn header() -> String {
    format!(
        "{:>5} {:>5} {:>4} {:>8} {:>6} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9} {:>11}  {}",
        "size",
        "dtype",
        "SMs",
        "pass",
        "hog",
        "hog SMs",
        "hog(ms)",
        "hog GB/s",
        "carveout",
        "alone",
        "with(ms)",
        "lost/ms",
        "held share",
        "gpu"
    )
}

pub fn row(r: &ContentionRecord) -> String {
    format!(
        "{:>5} {:>5} {:>4} {:>8} {:>6} {:>8} {:>8.1} {:>8} {:>9} {:>9.2} {:>9.2} {:>9} {:>11.3}  {}",
        r.size,
        r.dtype.name(),
        r.sms,
        format!("{:?}", r.phase).to_lowercase(),
        format!("{:?}", r.hog).to_lowercase(),
        r.hog_sms,
        r.hog_ms,
        r.hog_gbs
            .map(|g| format!("{g:.0}"))
            .unwrap_or_else(|| "-".into()),
        r.sm_carveout,
        r.base_bwd_ms,
        r.bwd_ms,
        r.lost_per_hog_ms
            .map(|l| format!("{l:.3}"))
            .unwrap_or_else(|| "-".into()),
        r.hog_sms as f64 / r.sms.max(1) as f64,
        crate::telemetry::cell(r.gpu.as_ref())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_gpu_it_fails_saying_what_it_needs() {
        let cfg = Config {
            size: "small",
            dtype: Precision::Fp32,
            hogs: &[HogKind::Spin],
            hog_sms: &[0],
            carveouts: &[0],
            phase: Phase::Forward,
            hog_share: 0.5,
            warmup: 0,
            steps: 1,
            batch: 1,
        };
        let e = run(&Device::Cpu, &cfg).unwrap_err().to_string();
        assert!(e.contains("CUDA") || e.contains("GPU"), "{e}");
        let bad = Config {
            hog_share: 1.5,
            ..cfg
        };
        let e = run(&Device::Cpu, &bad).unwrap_err().to_string();
        assert!(e.contains("--hog-share 1.5"), "{e}");
    }

    /// Records written before `--phase` timed the backward, and read back as such.
    #[test]
    fn a_record_without_a_phase_is_the_backward() {
        let old = r#"{"bench":"contention","size":"xl","dtype":"bf16","batch":8,"steps":5,"sms":132,"hog":"spin","hog_sms":4,"hog_ms":1.8,"sm_carveout":0,"base_bwd_ms":19.4,"bwd_ms":19.7,"bwd_std_ms":0.1,"lost_per_hog_ms":0.18}"#;
        let r: ContentionRecord = serde_json::from_str(old).unwrap();
        assert_eq!(r.phase, Phase::Backward);
        assert!(row(&r).contains("backward"), "{}", row(&r));
    }
}

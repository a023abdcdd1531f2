//! [`DdpOptions`]: how `Ddp` synchronises gradients, this rank's own check of them, and
//! `Ddp`'s accessors of them.

use crate::error::{DdpError, Result};
use crate::strategy::Strategy;
use candle_core::DType;

/// How [`Ddp`](crate::Ddp) synchronises gradients.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DdpOptions {
    pub strategy: Strategy,
    /// Communicate gradients in this dtype (e.g. bf16); `None` keeps them f32. On one rank
    /// nothing is sent, and a gradient keeps its own dtype (no cast: the step computes
    /// what one process computes).
    pub grad_dtype: Option<DType>,
    /// Reduce-scatter each bucket (rank r keeps the r-th slice) instead of all-reducing it.
    pub reduce_scatter: bool,
    /// Reduce-scatter mode (ZeRO-2): each bucket is collected `REDUCE_LAG` (2) stages
    /// after its launch and the bucket's full gradients freed (a gradient reduce-scattered
    /// alone sends this rank's chunk into a buffer of its own: nothing is copied), so that
    /// the backward holds the shards and the last stages' gradients, not every gradient.
    /// Off: all are collected after the backward (ZeRO-1).
    pub release_gradients: bool,
    /// SMs that the backward's GEMMs leave to NCCL's kernels (0: none; see
    /// [`seam::gemm_sms`]). Only eager strategies communicate during backward.
    pub gemm_sm_carveout: usize,
    /// Buckets that become ready together (eager: at the same stage; the others: all,
    /// after backward) go out as one coalesced launch (one NCCL group, one completion
    /// event) instead of one launch each.
    pub coalesce: bool,
    /// Allow parameters that get no gradient in a step (PyTorch DDP's
    /// `find_unused_parameters`): their gradient is taken as zero. Off by default: a
    /// parameter its stage's backward did not produce (listed under the wrong stage, or
    /// not used) is an error naming it and its stage.
    pub find_unused_parameters: bool,
    /// Gradient accumulation: `forward_backward` after k `forward_backward_no_sync` calls
    /// gives the mean of the k + 1 micro-batches' gradients (averaged over ranks too: the
    /// gradient of the mean loss over every row of every micro-batch, as one large batch
    /// would give). The sum of the accumulated local gradients is averaged across ranks,
    /// then multiplied by 1/(k + 1) when collected. `true` keeps the sum (PyTorch's
    /// behaviour, where one divides the loss by k + 1 oneself).
    pub sum_micro_batches: bool,
    /// Each bucket's all-reduce split in two ([`crate::split`]): a reduce-scatter launched
    /// during the backward (ZeRO-1's, by the copy engines on NCCL at worlds 2 and 4) and
    /// an all-gather of the averaged parts: chained to the reduce-scatter during the
    /// backward where the copy engines gather (`memplan::DDP_SPLIT_EARLY_WORLDS`), else
    /// after the norm, each bucket's AdamW waiting for its own, so that the gathers run
    /// beside the replicated AdamW instead of the backward's GEMMs.
    /// The same gradients, every rank holding every one; not with `reduce_scatter`.
    pub split: bool,
    /// Deferred reduce-scatters (ZeRO-1, split) launched at the model's first this many
    /// stages, the backward's last, go beside the others (`comm::Deferred::beside`; NCCL:
    /// its kernels on a second stream, not behind the copy engines: `ddp::tail`). `None`:
    /// `DDP_TAIL_STAGES`, else 0 (measured, not a default: docs/results/gpus-s37.md).
    pub tail_stages: Option<usize>,
    /// Split DDP with its gathers in the backward (`DDP_SPLIT_EARLY`): the launches at the
    /// model's first this many stages (the backward's last) are not gathered there but
    /// after the norm, beside the AdamW of every other bucket, which goes first
    /// (`ddp::tail`). `None`: `DDP_SPLIT_LATE_STAGES`, else [`crate::tail::LATE_STAGES`].
    pub late_gathers: Option<usize>,
    /// The model's first stages, up to this many MiB, go apart in a bucket launched last
    /// ([`crate::buckets::last_apart`]; `ddp::tail`). `None`: `DDP_LAST_BUCKET_MB`, else 0
    /// (off). Ranks compare it to 1/16 MiB.
    pub last_bucket_mb: Option<f64>,
    /// Every rank's batches hold as many tokens: where the model's stage 0 is an embedding
    /// table ([`seam::StagedModel::rows_stage0`]), a step gathers every rank's rows of its
    /// output's gradient and ids, and each rank computes the table's averaged gradient
    /// itself instead of reducing it after the backward (`ddp::rows`). Off by default;
    /// `DDP_ROWS=0` turns it off.
    pub gather_rows: bool,
}

impl From<Strategy> for DdpOptions {
    fn from(strategy: Strategy) -> Self {
        Self::new(strategy)
    }
}

impl DdpOptions {
    pub fn new(strategy: Strategy) -> Self {
        Self {
            strategy,
            grad_dtype: None,
            reduce_scatter: false,
            release_gradients: false,
            gemm_sm_carveout: 0,
            coalesce: false,
            find_unused_parameters: false,
            sum_micro_batches: false,
            split: false,
            tail_stages: None,
            late_gathers: None,
            last_bucket_mb: None,
            gather_rows: false,
        }
    }

    /// This rank's options, checked on their own (strategy parameters, gradient dtype, the
    /// GEMM carve-out against the device's SM count).
    pub(crate) fn check(&self, device: &candle_core::Device) -> Result<()> {
        self.strategy.validate()?;
        if let Some(d) = self.grad_dtype {
            if !matches!(d, DType::F32 | DType::BF16 | DType::F16) {
                return Err(DdpError::Input(format!(
                    "gradient dtype {d:?} is not supported (f32, bf16, f16)"
                )));
            }
        }
        seam::gemm_sms::check_carveout(device, self.gemm_sm_carveout)?;
        if let Some(mb) = self
            .last_bucket_mb
            .filter(|mb| !(mb.is_finite() && *mb >= 0.0))
        {
            return Err(DdpError::Input(format!(
                "last_bucket_mb {mb}: expected the MiB (a number >= 0) of the first stages to launch apart, last"
            )));
        }
        if self.split && (self.reduce_scatter || self.release_gradients) {
            return Err(DdpError::Input(
                "split all-reduce (DDP) with reduce_scatter or release_gradients (ZeRO): choose one".into(),
            ));
        }
        Ok(())
    }

    /// The options every rank must share beyond the strategy and dtype, as one number for
    /// the cross-rank check: ranks that reduce micro-batches or unused parameters
    /// differently would train on silently different gradients.
    pub(crate) fn gradient_options_code(&self) -> f64 {
        let (sum, unused) = (self.sum_micro_batches, self.find_unused_parameters);
        let rows = 8 * u64::from(self.gather_rows);
        // Counts of stages, capped where any model's stages end (and the sum stays exact).
        let stages = |k: Option<usize>| k.unwrap_or(0).min(0xffff) as u64;
        let tail = 16 * stages(self.tail_stages);
        let late = (1 << 20) * stages(self.late_gathers);
        let sixteenths = (self.last_bucket_mb.unwrap_or(0.0) * 16.0).ceil();
        let last = (1 << 36) * sixteenths.clamp(0.0, 65535.0) as u64;
        let split = 4 * u64::from(self.split);
        (u64::from(sum) + 2 * u64::from(unused) + split + rows + tail + late + last) as f64
    }
}

impl crate::Ddp {
    /// Sets [`DdpOptions::gemm_sm_carveout`] for the following steps.
    pub fn set_gemm_sm_carveout(&mut self, carveout: usize) -> Result<()> {
        seam::gemm_sms::check_carveout(&self.device, carveout)?;
        self.opts.gemm_sm_carveout = carveout;
        Ok(())
    }

    /// Sets [`DdpOptions::coalesce`] for the following steps.
    pub fn set_coalesce(&mut self, on: bool) {
        self.opts.coalesce = on;
    }

    pub fn options(&self) -> DdpOptions {
        self.opts
    }
}

/// An on-off environment variable of ddp's (`DDP_SPLIT`, `DDP_SPLIT_WINDOWS`,
/// `DDP_SPLIT_EARLY`, `DDP_SUMSQ`): `Some(true)` for 1, `Some(false)` for 0, `None` unset
/// or empty; another value is an error naming the variable and what 1 and 0 mean.
pub(crate) fn switch(var: &str, (one, zero): (&str, &str)) -> Result<Option<bool>> {
    parse_switch(var, std::env::var(var).ok().as_deref(), (one, zero))
}

fn parse_switch(var: &str, v: Option<&str>, (one, zero): (&str, &str)) -> Result<Option<bool>> {
    match v {
        None | Some("") => Ok(None),
        Some("1") => Ok(Some(true)),
        Some("0") => Ok(Some(false)),
        Some(v) => Err(DdpError::Input(format!(
            "{var}={v}: expected 1 ({one}) or 0 ({zero})"
        ))),
    }
}

/// A MiB environment variable of ddp's (`DDP_SPLIT_GATHER_MB`, `DDP_LAST_BUCKET_MB`):
/// `None` unset or empty, else a number >= 0; another value is an error naming the
/// variable and `what` it gives.
pub(crate) fn mib(var: &str, what: &str) -> Result<Option<f64>> {
    parse_mib(var, std::env::var(var).ok().as_deref(), what)
}

fn parse_mib(var: &str, v: Option<&str>, what: &str) -> Result<Option<f64>> {
    match v {
        None | Some("") => Ok(None),
        Some(v) => match v.parse::<f64>() {
            Ok(mb) if mb.is_finite() && mb >= 0.0 => Ok(Some(mb)),
            _ => Err(DdpError::Input(format!(
                "{var}={v}: expected {what} (a number >= 0)"
            ))),
        },
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn mib_is_a_number_of_at_least_0_or_unset_and_anything_else_names_the_variable() {
        let p = |v| super::parse_mib("DDP_X_MB", v, "the MiB of x");
        assert_eq!((p(None).unwrap(), p(Some("")).unwrap()), (None, None));
        assert_eq!(
            (p(Some("12.5")).unwrap(), p(Some("0")).unwrap()),
            (Some(12.5), Some(0.0))
        );
        for bad in ["-3", "NaN", "inf", "x"] {
            let e = p(Some(bad)).unwrap_err().to_string();
            assert!(
                e.contains(&format!("DDP_X_MB={bad}: expected the MiB of x")),
                "{e}"
            );
        }
    }

    #[test]
    fn a_switch_is_1_0_or_unset_and_anything_else_names_the_variable() {
        let p = |v| super::parse_switch("DDP_X", v, ("on", "off"));
        assert_eq!((p(None).unwrap(), p(Some("")).unwrap()), (None, None));
        assert_eq!(
            (p(Some("1")).unwrap(), p(Some("0")).unwrap()),
            (Some(true), Some(false))
        );
        let e = p(Some("yes")).unwrap_err().to_string();
        assert!(
            e.contains("DDP_X=yes") && e.contains("1 (on) or 0 (off)"),
            "{e}"
        );
    }
}

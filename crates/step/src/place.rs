//! Where a step runs AdamW: after the backward over all gradients, stage by stage inside
//! it (seam::InBackward), or so on a second CUDA stream (seam::SideStream); and the `auto`
//! policy that picks between them. Where a clipping step takes the gradient norm
//! ([`NormPlace`]).

use serde::{Deserialize, Serialize};

/// Where AdamW runs in a step (`--adamw`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum AdamwPlace {
    /// After the backward (and the clipping norm), over all gradients.
    #[default]
    After,
    /// Inside the backward where that is exact (no clipping; on one process one
    /// micro-batch; with DDP each bucket's update after its reduce), else after it.
    /// Inside: `side-stream` for fp32 on CUDA without TF32, `in-backward` otherwise (what
    /// measured fastest on nvidia-h200, runs 28-31 of docs/results/single-gpu-h200.md).
    /// Records name the place that ran.
    Auto,
    /// Stage by stage inside the backward, on the compute stream.
    InBackward,
    /// As `in-backward`, on a second CUDA stream beside the backward.
    SideStream,
}

impl AdamwPlace {
    /// The place that runs: `exact` says whether an update inside the backward equals one
    /// after it (no clipping; one micro-batch, or DDP's reduced buckets); `fp32_simt`: fp32
    /// GEMMs without TF32 on CUDA.
    pub fn resolve(self, exact: bool, fp32_simt: bool) -> AdamwPlace {
        match (self, exact) {
            (_, false) => AdamwPlace::After,
            (AdamwPlace::Auto, true) if fp32_simt => AdamwPlace::SideStream,
            (AdamwPlace::Auto, true) => AdamwPlace::InBackward,
            (p, true) => p,
        }
    }

    /// `STEP_ADAMW` (after, auto, in-backward, side-stream) where set, for comparisons
    /// without a flag in every binary (as `STEP_NORM`); else `self`. Anything else is an
    /// error naming it.
    pub fn or_env(self) -> anyhow::Result<Self> {
        or_env(
            "STEP_ADAMW",
            self,
            "after, auto, in-backward or side-stream",
        )
    }

    /// The name records use ("after", "in-backward", "side-stream").
    pub fn name(self) -> &'static str {
        match self {
            AdamwPlace::After => "after",
            AdamwPlace::Auto => "auto",
            AdamwPlace::InBackward => "in-backward",
            AdamwPlace::SideStream => "side-stream",
        }
    }
}

/// Where a clipping step takes the global gradient norm (`seam::StagedNorm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
///
/// `after` is the default: on nvidia-h100-x1 at xl bf16 (docs/results/train-speed-h100x1.md,
/// call 17) `train run --strategy single` took 48.32 ms with it, 48.60 with `in-backward`
/// (each stage's gradients are still read from memory, in ~100 shorter launches) and 51.43
/// with `side-stream` (the pass slows the backward's GEMMs more than it hides).
pub enum NormPlace {
    /// One pass over every gradient after the backward (and the reduce).
    #[default]
    After,
    /// Stage by stage inside the backward where the gradients are final there (one
    /// micro-batch; on one rank for DDP and ZeRO-1), on the compute stream; else after.
    InBackward,
    /// As `in-backward`, on a second CUDA stream beside the backward (CUDA only).
    SideStream,
}

impl NormPlace {
    /// The name records use.
    pub fn name(self) -> &'static str {
        match self {
            NormPlace::After => "after",
            NormPlace::InBackward => "in-backward",
            NormPlace::SideStream => "side-stream",
        }
    }

    /// `STEP_NORM` (after, in-backward, side-stream) where set, for comparisons without a
    /// flag in every binary; else `self`. Anything else is an error naming it.
    pub fn or_env(self) -> anyhow::Result<Self> {
        or_env("STEP_NORM", self, "after, in-backward or side-stream")
    }
}

/// `var`'s value where set (one of `expected`, case-insensitive), else `default`; anything
/// else is an error naming the variable and its value.
fn or_env<T: clap::ValueEnum>(var: &str, default: T, expected: &str) -> anyhow::Result<T> {
    match std::env::var(var) {
        Err(_) => Ok(default),
        Ok(v) => {
            T::from_str(&v, true).map_err(|_| anyhow::anyhow!("{var}={v}: expected {expected}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::AdamwPlace::*;

    #[test]
    fn inside_the_backward_only_where_exact() {
        for p in [After, Auto, InBackward, SideStream] {
            assert_eq!(p.resolve(false, true), After);
        }
        assert_eq!(Auto.resolve(true, true), SideStream);
        assert_eq!(Auto.resolve(true, false), InBackward);
        assert_eq!(After.resolve(true, false), After);
        assert_eq!(SideStream.resolve(true, false), SideStream);
    }
}

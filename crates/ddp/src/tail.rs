//! The backward's last gradients beside the copy engines' queue (opt-in: `DDP_TAIL_STAGES=K`
//! or [`DdpOptions::tail_stages`]): the deferred reduce-scatters launched at the model's
//! first K stages (the backward's last; and any launched after it) go out with
//! `comm::Deferred::beside`. On NCCL, where the copy engines reduce-scatter (worlds 2 and 4
//! on one node), those run by NCCL's kernels on a second communication stream instead of
//! queueing behind the copy engines. Such a launch takes no norm slot (`ddp::squares`): its
//! parts join the slots in the one norm kernel after the backward.
//!
//! Built for a backlog that CUPTI's timelines showed: 3.3-3.9 ms of copies after split DDP's
//! backward at world 4 (gpus-s33.md, gpus-s35.md). Measured untraced it does not pay
//! (xl bf16, 4 H200s, calls 201-202, docs/results/gpus-s37.md): split DDP with K = 4, 7, 10
//! took 46.21, 46.19, 46.60 ms against 45.93 and 45.88; ZeRO-1 with its last bucket beside
//! 37.35-37.80 against 37.73-37.99 at 8 rows, but 109.06 against 108.19 at 32. The
//! backlog was mostly the tracer's: recording each copy made the traced step 48.6 ms; with
//! kernel records only (`CUPTI_TRACE_KERNELS_ONLY=1`, call 204) it is 46.1, and 0.3-1.8 ms
//! of copies are left after the backward. So it is not the default.
//!
//! Split DDP with its gathers in the backward (world 2) has a tail of its own: the last
//! launches' reduce-scatters, adds and chained gathers all run after the backward's last
//! kernel, before the norm. `DDP_SPLIT_LATE_STAGES=K` ([`DdpOptions::late_gathers`])
//! leaves the gathers of the launches at the model's first K stages (and any after the
//! backward) to after the norm: every other bucket's AdamW runs first, and the last
//! buckets' AdamW waits for their gather (`ddp::split`). By default K = [`LATE_STAGES`]:
//! xl bf16 bucketed:25 at world 2 (nvidia-h200-x2, docs/results/gpus-s57.md) took 43.39-43.71
//! ms with K = 4 and 43.28-43.50 with K = 8 against 43.75-43.84 with K = 0 (call 318, three
//! runs each, one GEMM table); traced, the gaps after the backward went from 0.40-0.65 ms to
//! 0.11-0.14.
//!
//! A large last bucket (ZeRO-1's 400 MB) becomes ready only when the backward's last stage
//! has run, and all of its collective is then the tail: 0.38-0.55 ms of idle after the
//! backward in zero1's world-2 timeline (call 320). `DDP_LAST_BUCKET_MB=M`
//! ([`DdpOptions::last_bucket_mb`], off by default) puts the model's first stages, up to M
//! MiB, in a bucket of their own, launched last, out of whichever buckets held them
//! ([`crate::buckets::last_apart`]): the bucket before it launches a stage or more before
//! the backward ends. Measured, not a default: xl bf16 zero1 at world 2 (nvidia-h200-x2,
//! call 324, docs/results/gpus-s57.md) took 37.89-38.15 ms with M = 64 against 37.23-37.51
//! without.

use crate::error::{DdpError, Result};
use crate::launch::InFlight;
use crate::reducer::Ddp;
use crate::DdpOptions;
use candle_core::Tensor;

/// The default of [`DdpOptions::late_gathers`] (see the module's doc).
pub const LATE_STAGES: usize = 4;

/// `opts` with [`DdpOptions::tail_stages`], [`DdpOptions::late_gathers`] and
/// [`DdpOptions::last_bucket_mb`] set: as given, else `DDP_TAIL_STAGES`,
/// `DDP_SPLIT_LATE_STAGES` (counts of stages) and `DDP_LAST_BUCKET_MB`, else 0,
/// [`LATE_STAGES`] and 0. Every rank's must agree (`DdpOptions::gradient_options_code`).
pub(crate) fn resolved(mut opts: DdpOptions) -> Result<DdpOptions> {
    let tail = "whose reduce-scatters go beside the copy engines' queue";
    if opts.tail_stages.is_none() {
        opts.tail_stages = Some(stages("DDP_TAIL_STAGES", tail)?.unwrap_or(0));
    }
    if opts.last_bucket_mb.is_none() {
        let last = "the MiB of the model's first stages to launch apart, last";
        opts.last_bucket_mb = Some(crate::options::mib("DDP_LAST_BUCKET_MB", last)?.unwrap_or(0.0));
    }
    let late = "whose gathers wait for the norm (split DDP, gathers in the backward)";
    if opts.late_gathers.is_none() {
        opts.late_gathers = Some(stages("DDP_SPLIT_LATE_STAGES", late)?.unwrap_or(LATE_STAGES));
    }
    Ok(opts)
}

impl Ddp {
    /// Whether a launch at backward stage `stage` (`None`: after the backward) goes beside
    /// the others: a deferred reduce-scatter (ZeRO-1's, split DDP's; not ZeRO-2's, collected
    /// during the backward, nor where a launch's gathers go with it: split DDP's early
    /// gathers) at one of the first `tail_stages`.
    pub(crate) fn beside(&self, stage: Option<usize>) -> bool {
        let k = self.opts.tail_stages.unwrap_or(0);
        let deferred = self.scatters() && !(self.opts.release_gradients || self.split_setup.early);
        deferred && k > 0 && stage.is_none_or(|s| s < k)
    }

    /// Whether a launch at backward stage `stage` (`None`: after the backward) that would
    /// gather during the backward (split DDP's early gathers) leaves its gather to after
    /// the norm: one of the first `late_gathers` stages.
    pub(crate) fn late_gather(&self, stage: Option<usize>) -> bool {
        let k = self.opts.late_gathers.unwrap_or(0);
        self.split_setup.early && k > 0 && stage.is_none_or(|s| s < k)
    }

    /// This rank's reduced parts of a launch that went beside the others, for the norm.
    pub(crate) fn beside_parts(&self, f: &InFlight) -> Result<Vec<Tensor>> {
        match f.beside {
            true => (f.buckets.iter().flat_map(|p| p.bufs()))
                .map(|t| self.chunk_of(t))
                .collect(),
            false => Ok(Vec::new()),
        }
    }
}

fn stages(var: &str, what: &str) -> Result<Option<usize>> {
    parse(var, std::env::var(var).ok().as_deref(), what)
}

fn parse(var: &str, v: Option<&str>, what: &str) -> Result<Option<usize>> {
    match v {
        None | Some("") => Ok(None),
        Some(v) => v.parse().map(Some).map_err(|_| {
            DdpError::Input(format!(
                "{var}={v}: expected a count of stages (0 or more) {what}"
            ))
        }),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn tail_stages_is_a_count_and_anything_else_names_the_variable() {
        let parse = |v| super::parse("DDP_TAIL_STAGES", v, "beside");
        assert_eq!(parse(None).unwrap(), None);
        assert_eq!(parse(Some("7")).unwrap(), Some(7));
        let e = parse(Some("-1")).unwrap_err().to_string();
        assert!(e.contains("DDP_TAIL_STAGES=-1"), "{e}");
    }
}

//! `train run`'s closing line, from its [`Summary`].

use crate::trainer::Summary;
use candle_core::Device;

/// "train: peak GPU memory X GiB (...)" for this rank (run.sh's records read it): the
/// process's peak, and where `first` (the peak over the first, eager step, after which the
/// pool's mark was reset) is known, the peak of the steps after it; `None` off CUDA.
/// Gather buffers in NCCL windows (`comm::nccl::window_bytes`) are outside the pool. They
/// are made once, at the end of `release_masters` (after `before_windows`, the pool's mark
/// until then, which does not count them), and held to the end: added to every later
/// figure.
pub(crate) fn peak_line(
    before_windows: Option<u64>,
    first: Option<u64>,
    dev: &Device,
) -> Option<String> {
    let windows = comm::nccl::window_bytes();
    let add = |b: Option<u64>| b.map(|b| b + windows);
    let after = add(seam::memory::process_peak(dev));
    let gib = seam::memory::gib(after.max(add(first)).max(before_windows))?;
    let later = match seam::memory::gib(after.filter(|_| first.is_some())) {
        Some(l) => format!("; after the first step {l:.2} GiB"),
        None => String::new(),
    };
    // Its parts: what the pool holds between steps (parameters, optimizer state, buffers
    // kept), the captured step's own memory (its transients), the pool's mark since the reset.
    // The pool's reservation beside its mark: what its layout holds beyond the bytes in use.
    let parts = match (
        seam::memory::gib(add(seam::memory::current(dev))),
        seam::memory::gib(seam::graph::mem_high(dev)),
        seam::memory::gib(seam::memory::peak(dev)),
        seam::memory::gib(seam::memory::reserved_peak(dev)),
    ) {
        (Some(held), Some(graph), Some(pool), Some(reserved)) => format!(
            "; held between steps {held:.2} GiB, the captured step's own {graph:.2} GiB, the pool's mark {pool:.2} GiB ({reserved:.2} GiB reserved)"
        ),
        _ => String::new(),
    };
    let win = match seam::memory::gib(Some(windows).filter(|&b| b > 0)) {
        Some(w) => match comm::nccl::ce_reduces() {
            true => format!(", {w:.2} GiB of them in NCCL windows (gather buffers and the copy-engine reduce-scatters' slots)"),
            false => format!(", {w:.2} GiB of them gather buffers in NCCL windows"),
        },
        None => String::new(),
    };
    Some(format!("train: peak GPU memory {gib:.2} GiB (tensors and graphs; NCCL's own buffers and the CUDA context aside){later}{parts}{win}"))
}

impl Summary {
    /// What the run measured, and nothing it did not: `train run`'s closing line.
    pub fn line(&self) -> String {
        let s = self;
        if s.steps == s.resumed_from {
            return format!(
                "no step trained: the run is at step {} (resumed), the stop or the end is not past it",
                s.resumed_from
            );
        }
        let mfu = match &s.mfu {
            Some((m, of)) => format!(", MFU {:.1}% of {of}", 100.0 * m),
            None => String::new(),
        };
        let mut line = format!(
            "trained steps {}..{} in {:.1} s ({:.0} tokens/s{mfu})",
            s.resumed_from, s.steps, s.seconds, s.tokens_per_s
        );
        if let Some(l) = s.final_train_loss {
            line += &format!(": train loss {l:.4}");
        }
        match s.final_val {
            Some((step, v)) => line += &format!(", validation loss {v:.4} (at step {step})"),
            None => line += ", no validation in this run",
        }
        if s.skipped > 0 {
            line += &format!(", {} steps skipped (non-finite)", s.skipped);
        }
        line + &format!(", unigram entropy {:.4} nats/token", s.unigram_entropy)
    }
}

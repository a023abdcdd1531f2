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

/// Steps a run's median leaves out at its start (the GEMM tuning, the capture): as
/// run.sh's train-speed and `bench` time from step 6.
const WARM_STEPS: usize = 5;
/// Steps the median needs past those.
const MIN_KEPT: usize = 3;
/// The median is of the latest this many steps at most (the record is bounded).
const LATEST: usize = 10_000;

impl Summary {
    /// Keeps step `step`'s tokens/s for the median: the first [`WARM_STEPS`] and, of the
    /// rest, at least the latest [`LATEST`] (at most twice that are held).
    pub fn record_rate(&mut self, step: u64, tokens_per_s: f64) {
        let all = &mut self.step_tokens_per_s;
        all.push((step, tokens_per_s));
        if all.len() >= WARM_STEPS + 2 * LATEST {
            all.drain(WARM_STEPS..WARM_STEPS + LATEST);
        }
    }

    /// "; steps A-B: median N tokens/s, MFU M% of …": the median of the latest [`LATEST`]
    /// logged steps after the first [`WARM_STEPS`], and its MFU where there is one; empty
    /// where fewer than [`MIN_KEPT`] are left. A step that held an evaluation or a
    /// checkpoint, or the host's stall, does not move the median.
    fn steady(&self) -> String {
        let all = &self.step_tokens_per_s;
        let skip = WARM_STEPS
            .min(all.len())
            .max(all.len().saturating_sub(LATEST));
        let kept = &all[skip..];
        if kept.len() < MIN_KEPT {
            return String::new();
        }
        let (first, last) = (kept[0].0, kept[kept.len() - 1].0);
        let mut t: Vec<f64> = kept.iter().map(|s| s.1).collect();
        t.sort_by(f64::total_cmp);
        let median = (t[(t.len() - 1) / 2] + t[t.len() / 2]) / 2.0;
        let mfu = match &self.mfu {
            Some(m) => format!(", MFU {:.1}% of {}", 100.0 * m.at(median), m.gpu),
            None => String::new(),
        };
        format!("; steps {first}-{last}: median {median:.0} tokens/s{mfu}")
    }

    /// What the run measured, and nothing it did not: `train run`'s closing line.
    pub fn line(&self) -> String {
        let s = self;
        if s.steps == s.resumed_from {
            return format!(
                "no step trained: the run is at step {} (resumed), the stop or the end is not past it",
                s.resumed_from
            );
        }
        let mut line = format!(
            "trained steps {}..{} in {:.1} s ({:.0} tokens/s{})",
            s.resumed_from,
            s.steps,
            s.seconds,
            s.tokens_per_s,
            s.steady()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::shape_by_name;
    use crate::mfu::Mfu;

    #[test]
    fn the_steady_rate_is_the_median_past_the_first_steps_and_one_short_interval_moves_it_not() {
        let xl = shape_by_name("xl", Some(128)).unwrap();
        let mut s = Summary {
            resumed_from: 10,
            steps: 20,
            mfu: Some(Mfu::new(&xl, 683, 1, "NVIDIA H200", 989e12).unwrap()),
            ..Summary::default()
        };
        // Steps 11-15 warm (tuning, capture); 16-20 at 25,600 tokens/s but one far off.
        let rates = [
            1e3, 3e6, 2e4, 2e4, 2e4, 25_600.0, 25_600.0, 3e6, 25_600.0, 25_600.0,
        ];
        s.step_tokens_per_s = (11..).zip(rates).collect();
        let mfu = Mfu::new(&xl, 683, 1, "NVIDIA H200", 989e12)
            .unwrap()
            .at(25_600.0);
        assert_eq!(
            s.steady(),
            format!(
                "; steps 16-20: median 25600 tokens/s, MFU {:.1}% of NVIDIA H200's bf16 dense peak, 989 TFLOP/s a GPU",
                100.0 * mfu
            )
        );
        // Too few steps past the warm ones: no median rather than one of a short interval.
        s.step_tokens_per_s.truncate(7);
        assert_eq!(s.steady(), "");
    }

    #[test]
    fn the_rates_held_are_bounded_and_the_median_is_of_the_latest() {
        let mut s = Summary::default();
        for step in 1..=25_000u64 {
            // The last LATEST steps at 2.0, every one before at 1.0.
            s.record_rate(step, if step > 15_000 { 2.0 } else { 1.0 });
            assert!(s.step_tokens_per_s.len() < WARM_STEPS + 2 * LATEST);
        }
        assert_eq!(s.step_tokens_per_s[0].0, 1, "the first steps are kept");
        assert_eq!(s.steady(), "; steps 15001-25000: median 2 tokens/s");
    }
}

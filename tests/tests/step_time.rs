//! `StepOut::seconds`: each step's time, from the end of the step before it to its own
//! end, whenever its values are read: as the next step returns them, or from a flush. On
//! the CPU a step computes as it is queued, so a host clock read when its values are read
//! gives the last step (flushed right after the one before it returned) nearly nothing;
//! the step must keep when it ended. The model sleeps in its forward, so every step takes
//! at least that long; a host stall between two steps counts in the second.

mod common;

use candle_core::Tensor;
use common::*;
use model::{AdamWConfig, Batch, ParamSet, StagedModel};
use std::time::Duration;
use step::{StepOptions, TrainStep};

/// The ToyModel, sleeping `NAP` in its first stage's forward.
struct Slow(Box<dyn StagedModel + Send>);

const NAP: Duration = Duration::from_millis(40);

impl StagedModel for Slow {
    fn params(&self) -> &ParamSet {
        self.0.params()
    }
    fn num_stages(&self) -> usize {
        self.0.num_stages()
    }
    fn stage_params(&self, s: usize) -> Vec<usize> {
        self.0.stage_params(s)
    }
    fn forward_stage(&self, s: usize, x: Option<&Tensor>, b: &Batch) -> seam::Result<Tensor> {
        if s == 0 {
            std::thread::sleep(NAP);
        }
        self.0.forward_stage(s, x, b)
    }
    fn check_batch(&self, b: &Batch) -> seam::Result<()> {
        self.0.check_batch(b)
    }
}

#[test]
fn every_step_has_its_own_time_the_flushed_last_one_too() {
    let m = Slow(build(Kind::Toy, 0));
    let cfg = AdamWConfig::default();
    let mut st = TrainStep::new(&m, Box::new(step::Local), cfg, StepOptions::default()).unwrap();
    let mut outs = Vec::new();
    for s in 0..5 {
        if s == 3 {
            // The host stalls between steps 2 and 3 (a data loader, a checkpoint).
            std::thread::sleep(3 * NAP);
        }
        outs.extend(st.step(&m, &[global_batch(Kind::Toy, s)], cfg.lr).unwrap());
    }
    outs.extend(st.flush().unwrap());
    assert_eq!(outs.len(), 5);
    assert_eq!(
        outs[0].seconds, None,
        "the first step has no step before it"
    );
    for (s, o) in outs.iter().enumerate().skip(1) {
        let t = o.seconds.expect("a step after the first is timed");
        let least = if s == 3 { 4 * NAP } else { NAP };
        assert!(
            t >= least.as_secs_f64(),
            "step {s} took {t} s, less than the {least:?} it holds (its forward; before step 3 the host stalls)"
        );
    }
}

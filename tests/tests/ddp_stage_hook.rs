//! The stage hook (the profiler's seam): every stage once, last to first, and its errors
//! fail the step instead of being dropped.

mod common;
use common::*;
use ddp::{Ddp, DdpOptions, Strategy};
use std::sync::{Arc, Mutex};

/// Installs a hook that records the stages it sees.
fn log_stages(d: &mut Ddp) -> Arc<Mutex<Vec<usize>>> {
    let log = Arc::new(Mutex::new(Vec::new()));
    let l = log.clone();
    d.set_stage_hook(Some(Box::new(move |s| {
        l.lock().unwrap().push(s);
        Ok(())
    })));
    log
}

#[test]
fn the_hook_sees_every_stage_from_the_last() {
    let seen = on_ranks(1, |_, comm| {
        let m = build(Kind::Lm, 0);
        let mut d = Ddp::new(comm, m.as_ref(), DdpOptions::new(Strategy::Overlap)).unwrap();
        let log = log_stages(&mut d);
        d.forward_backward(m.as_ref(), &global_batch(Kind::Lm, 0))
            .unwrap();
        d.finish_gradient_synchronization().unwrap();
        let stages = m.num_stages();
        let got = log.lock().unwrap().clone();
        (got, stages)
    });
    let (got, stages) = &seen[0];
    assert_eq!(*got, (0..*stages).rev().collect::<Vec<_>>());
}

#[test]
fn a_failing_hook_fails_the_step() {
    let errs = on_ranks(1, |_, comm| {
        let m = build(Kind::Toy, 0);
        let mut d = Ddp::new(comm, m.as_ref(), DdpOptions::new(Strategy::Flat)).unwrap();
        d.set_stage_hook(Some(Box::new(|s| {
            Err(comm::CommError::InvalidArgument {
                op: "mark",
                rank: 0,
                msg: format!("hook refused stage {s}"),
            })
        })));
        d.forward_backward(m.as_ref(), &global_batch(Kind::Toy, 0))
            .unwrap_err()
            .to_string()
    });
    assert!(errs[0].contains("hook refused stage"), "{}", errs[0]);
}

/// A forward that fails (a bad batch) fails the step by name and leaves the hook
/// installed for the next step; `forward_backward_with` runs its callback before every
/// forward stage, in order, and its error fails the step as is.
#[test]
fn a_failed_forward_keeps_the_hook_and_the_forward_callback_sees_every_stage() {
    let out = on_ranks(1, |_, comm| {
        let m = build(Kind::Lm, 0);
        let mut d = Ddp::new(comm, m.as_ref(), DdpOptions::new(Strategy::Overlap)).unwrap();
        let log = log_stages(&mut d);
        let mut bad = global_batch(Kind::Lm, 0);
        bad.input = (bad.input.ones_like().unwrap() * 1e9).unwrap();
        let err = d
            .forward_backward(m.as_ref(), &bad)
            .unwrap_err()
            .to_string();
        let mut before = Vec::new();
        d.forward_backward_with(m.as_ref(), &global_batch(Kind::Lm, 0), |s| {
            before.push(s);
            Ok(())
        })
        .unwrap();
        d.finish_gradient_synchronization().unwrap();
        let refused = d
            .forward_backward_with(m.as_ref(), &global_batch(Kind::Lm, 1), |s| {
                Err(ddp::DdpError::Input(format!("not before stage {s}")))
            })
            .unwrap_err()
            .to_string();
        let hooked = log.lock().unwrap().len();
        (err, before, hooked, m.num_stages(), refused)
    });
    let (err, before, hooked, stages, refused) = &out[0];
    assert!(err.contains("token"), "{err}");
    assert_eq!(*before, (0..*stages).collect::<Vec<_>>());
    assert_eq!(hooked, stages, "the hook was lost by the failed forward");
    assert!(refused.contains("not before stage 0"), "{refused}");
}

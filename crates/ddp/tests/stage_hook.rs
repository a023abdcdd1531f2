//! The stage hook (the profiler's seam): every stage once, last to first, and its errors
//! fail the step instead of being dropped.

mod common;
use common::*;
use ddp::{Ddp, DdpOptions, Strategy};
use std::sync::{Arc, Mutex};

#[test]
fn the_hook_sees_every_stage_from_the_last() {
    let seen = on_ranks(1, |_, comm| {
        let m = build(Kind::Lm, 0);
        let mut d = Ddp::new(comm, m.as_ref(), DdpOptions::new(Strategy::Overlap)).unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let l = log.clone();
        d.set_stage_hook(Some(Box::new(move |s| {
            l.lock().unwrap().push(s);
            Ok(())
        })));
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

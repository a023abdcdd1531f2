//! `step::TrainStep` against the reference step (common::reference_step) where the backward's
//! tail is arranged otherwise (ddp::tail): the last stages' reduce-scatters beside the
//! others, split DDP's last gathers after the norm, and the model's first stages in a
//! bucket of their own. Weights within 1e-5 relative; the norms within 1e-5.

mod common;

use common::reference_step::*;
use common::*;
use ddp::{Ddp, DdpOptions, Strategy};
use model::StagedModel;

#[test]
fn the_last_stages_reduced_beside_or_gathered_late_equal_the_reference_step() {
    // ddp::tail: the reduce-scatters launched at the model's first 2 stages (the backward's
    // last) go beside the others (NCCL: by its kernels on a second stream); the norm takes
    // their parts and the other launches' slots together. Split DDP on 4 ranks, ZeRO-1 on
    // 2, with 2 micro-batches.
    let want = reference_run(2);
    let split = |m: &dyn StagedModel, c| -> Box<dyn step::Strategy> {
        let o = DdpOptions {
            split: true,
            tail_stages: Some(2),
            ..bucketed()
        };
        Box::new(Ddp::new(c, m, o).unwrap())
    };
    let got = with_step(4, 2, split);
    assert_close("ddp split, 4 ranks, tail beside", &got, &want);
    let zero1 = |m: &dyn StagedModel, c| {
        let o = DdpOptions {
            tail_stages: Some(2),
            ..bucketed()
        };
        zero_over(m, c, o)
    };
    let got = with_step(2, 2, zero1);
    assert_close("zero1, 2 ranks, tail beside", &got, &want);
    // Split DDP on 2 ranks gathers each launch in the backward (K = 0), or the launches at
    // the first K stages leave their gathers to after the norm, their AdamW last (2; every
    // stage; the default, ddp::tail::LATE_STAGES, in the split test above).
    fn late<const K: usize>(
        m: &dyn StagedModel,
        c: std::sync::Arc<dyn comm::Communicator>,
    ) -> Box<dyn step::Strategy> {
        let o = DdpOptions {
            split: true,
            late_gathers: Some(K),
            ..bucketed()
        };
        Box::new(Ddp::new(c, m, o).unwrap())
    }
    let got = with_step(2, 2, late::<0>);
    assert_close(
        "ddp split, 2 ranks, every gather in the backward",
        &got,
        &want,
    );
    let got = with_step(2, 2, late::<2>);
    assert_close(
        "ddp split, 2 ranks, last 2 stages gathered late",
        &got,
        &want,
    );
    let want = reference_run(1);
    let got = with_step(2, 1, late::<{ usize::MAX }>);
    assert_close("ddp split, 2 ranks, every gather late", &got, &want);
}

#[test]
fn the_first_stages_apart_equal_the_reference_step() {
    // DdpOptions::last_bucket_mb (ddp::tail): the model's first stages, up to 0.01 MiB, go
    // out of their buckets into one of their own, launched last (the tiny LM in buckets of
    // 0.1 MiB: one bucket more).
    let o = |mb| DdpOptions {
        last_bucket_mb: Some(mb),
        ..DdpOptions::new(Strategy::Bucketed { bucket_mb: 0.1 })
    };
    let counts = on_ranks(2, move |_, c| {
        let m = build(Kind::Lm, 0);
        let n = |mb| {
            Ddp::new(c.clone(), m.as_ref(), o(mb))
                .unwrap()
                .buckets()
                .len()
        };
        (n(0.0), n(0.01))
    });
    assert_eq!(counts[0].1, counts[0].0 + 1, "{counts:?}");
    fn zero1(
        m: &dyn StagedModel,
        c: std::sync::Arc<dyn comm::Communicator>,
    ) -> Box<dyn step::Strategy> {
        let o = DdpOptions {
            last_bucket_mb: Some(0.01),
            ..DdpOptions::new(Strategy::Bucketed { bucket_mb: 0.1 })
        };
        zero_over(m, c, o)
    }
    fn split(
        m: &dyn StagedModel,
        c: std::sync::Arc<dyn comm::Communicator>,
    ) -> Box<dyn step::Strategy> {
        let o = DdpOptions {
            last_bucket_mb: Some(0.01),
            split: true,
            ..DdpOptions::new(Strategy::Bucketed { bucket_mb: 0.1 })
        };
        Box::new(Ddp::new(c, m, o).unwrap())
    }
    let want = [reference_run(1), reference_run(2)];
    let cases: [(&str, usize, u64, MakeStrategy); 4] = [
        ("zero1, 2 ranks", 2, 1, zero1),
        ("zero1, 4 ranks", 4, 1, zero1),
        ("ddp split, 2 ranks", 2, 1, split),
        ("zero1, 2 ranks, 2 micro-batches", 2, 2, zero1),
    ];
    for (name, world, accum, s) in cases {
        let got = with_step(world, accum, s);
        let name = format!("{name}, first stages apart");
        assert_close(&name, &got, &want[accum as usize - 1]);
    }
}

//! A step whose gradients are not finite is skipped (`StepOptions::skip_nonfinite`, and
//! whenever the step clips): AdamW writes nothing, so the weights after it are those
//! before it, bit for bit, and training goes on from them. One rank, DDP on 2 ranks and
//! ZeRO-1 on 2 ranks; with clipping and without. The ToyModel reads float inputs: a batch
//! with an infinite input gives a non-finite loss and gradients.

mod common;

use common::*;
use ddp::{shard_batch, Ddp, DdpOptions, Strategy};
use model::{AdamWConfig, Batch, StagedModel};
use std::sync::Arc;
use step::{StepOptions, TrainStep};
use zero1::Zero1Overlap;

type MakeStrategy = fn(&dyn StagedModel, Arc<dyn comm::Communicator>) -> Box<dyn step::Strategy>;

/// The global batch of step `s`, its inputs infinite at step 2.
fn batch(s: u64) -> Batch {
    let b = global_batch(Kind::Toy, s);
    match s {
        2 => Batch::new((&b.input * f64::INFINITY).unwrap(), b.targets.clone()),
        _ => b,
    }
}

/// Per rank: the weights after steps 0-1, after the poisoned step 2, after step 3; the
/// norm read for step 2.
fn run(world: usize, clip: f64, skip: bool, sync: MakeStrategy) -> Vec<[Vec<Vec<f32>>; 4]> {
    on_ranks(world, move |rank, comm| {
        let m = build(Kind::Toy, 0);
        let s = sync(m.as_ref(), comm);
        let opts = StepOptions {
            clip,
            skip_nonfinite: skip,
            ..StepOptions::default()
        };
        let cfg = AdamWConfig::default();
        let mut st = TrainStep::new(m.as_ref(), s, cfg, opts).unwrap();
        let mut snaps = Vec::new();
        let mut norm2 = None;
        for s in 0..4 {
            let b = shard_batch(&batch(s), rank, world).unwrap();
            st.step(m.as_ref(), &[b], cfg.lr).unwrap();
            let out = st.flush().unwrap().unwrap();
            if s == 2 {
                norm2 = out.grad_norm;
            }
            if s >= 1 {
                snaps.push(weights(m.as_ref()));
            }
        }
        let n = norm2.expect("the step takes the norm");
        assert!(!n.is_finite(), "step 2's norm is {n}");
        snaps.push(vec![vec![n as f32]]);
        [
            snaps.remove(0),
            snaps.remove(0),
            snaps.remove(0),
            snaps.remove(0),
        ]
    })
}

fn local(_: &dyn StagedModel, _: Arc<dyn comm::Communicator>) -> Box<dyn step::Strategy> {
    Box::new(step::Local)
}
fn ddp2(m: &dyn StagedModel, c: Arc<dyn comm::Communicator>) -> Box<dyn step::Strategy> {
    let o = DdpOptions::new(Strategy::Bucketed { bucket_mb: 0.0002 });
    Box::new(Ddp::new(c, m, o).unwrap())
}
fn zero1(m: &dyn StagedModel, c: Arc<dyn comm::Communicator>) -> Box<dyn step::Strategy> {
    let s = Strategy::Bucketed { bucket_mb: 0.0002 };
    let z = Zero1Overlap::new(c, m, s, AdamWConfig::default()).unwrap();
    Box::new(z)
}

#[test]
fn a_non_finite_step_is_skipped_and_training_goes_on() {
    for (what, world, sync) in [
        ("single", 1, local as MakeStrategy),
        ("ddp, 2 ranks", 2, ddp2),
        ("zero1, 2 ranks", 2, zero1),
    ] {
        for (clip, skip) in [(0.0, true), (1.0, false), (1.0, true)] {
            for (r, [before, after, next, _]) in run(world, clip, skip, sync).iter().enumerate() {
                let case = format!("{what}, clip {clip}, skip {skip}, rank {r}");
                assert_eq!(before, after, "{case}: the skipped step wrote weights");
                assert!(next.iter().flatten().all(|x| x.is_finite()), "{case}");
                assert!(
                    max_diff(next, after) > 0.0,
                    "{case}: the next step trained nothing"
                );
            }
        }
    }
}

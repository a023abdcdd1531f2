//! Gradient accumulation through `step::TrainStep`, as `train run --accum k` runs it: k
//! micro-batches of m rows step as one micro-batch of k·m rows, within 1e-5 relative over
//! 50 steps of the tiny LM with clipping active, on one rank, with DDP and with ZeRO-1 on 2
//! ranks (the sums in place, seam::accum; the last micro-batch's reduction overlapping its
//! backward).

mod common;

use candle_core::Tensor;
use common::*;
use ddp::{shard_batch, Ddp, DdpOptions, Strategy};
use model::{AdamWConfig, Batch, StagedModel};
use step::{AdamwPlace, StepOptions, TrainStep};
use zero1::Zero1Overlap;

const STEPS: u64 = 50;
const ACCUM: u64 = 4;

fn micro(s: u64) -> Vec<Batch> {
    (0..ACCUM)
        .map(|k| global_batch(Kind::Lm, s * ACCUM + k))
        .collect()
}

/// The k micro-batches of step `s` as one batch of their rows.
fn whole(s: u64) -> Batch {
    let bs = micro(s);
    let cat = |f: fn(&Batch) -> &Tensor| {
        let ts: Vec<&Tensor> = bs.iter().map(f).collect();
        Tensor::cat(&ts, 0).unwrap()
    };
    Batch::new(cat(|b| &b.input), cat(|b| &b.targets))
}

type MakeStrategy =
    fn(&dyn StagedModel, std::sync::Arc<dyn comm::Communicator>) -> Box<dyn step::Strategy>;

/// Every rank's weights after STEPS steps, each on `batches(s)` split over the ranks.
fn run(world: usize, batches: fn(u64) -> Vec<Batch>, sync: MakeStrategy) -> Vec<Vec<Vec<f32>>> {
    on_ranks(world, move |rank, comm| {
        let m = build(Kind::Lm, 0);
        let opts = StepOptions {
            clip: 0.05,
            adamw: AdamwPlace::Auto,
            ..StepOptions::default()
        };
        let sy = sync(m.as_ref(), comm);
        let mut st = TrainStep::new(m.as_ref(), sy, AdamWConfig::default(), opts).unwrap();
        for s in 0..STEPS {
            let bs: Vec<Batch> = batches(s)
                .iter()
                .map(|b| shard_batch(b, rank, world).unwrap())
                .collect();
            st.step(m.as_ref(), &bs, 1e-3).unwrap();
        }
        st.flush().unwrap();
        weights(m.as_ref())
    })
}

fn local(
    _: &dyn StagedModel,
    _: std::sync::Arc<dyn comm::Communicator>,
) -> Box<dyn step::Strategy> {
    Box::new(step::Local)
}

#[test]
fn k_micro_batches_step_as_one_batch_of_their_rows() {
    let want = run(1, |s| vec![whole(s)], local).remove(0);
    let scale = want.iter().flatten().fold(0f32, |a, x| a.max(x.abs()));
    let ddp: MakeStrategy = |m, c| {
        let o = DdpOptions::new(Strategy::Bucketed { bucket_mb: 0.01 });
        Box::new(Ddp::new(c, m, o).unwrap())
    };
    let zero1: MakeStrategy = |m, c| {
        let s = Strategy::Bucketed { bucket_mb: 0.01 };
        let mut z = Zero1Overlap::new(c, m, s, AdamWConfig::default()).unwrap();
        z.set_gather_ahead(true);
        Box::new(z)
    };
    for (what, world, sync) in [
        ("single", 1, local as MakeStrategy),
        ("ddp bucketed, 2 ranks", 2, ddp),
        ("zero1, 2 ranks", 2, zero1),
    ] {
        for (r, w) in run(world, micro, sync).iter().enumerate() {
            let d = max_diff(w, &want) / scale;
            assert!(
                d <= 1e-5,
                "{what}, rank {r}: --accum {ACCUM} differs by {d:.2e} (relative) from one batch of {ACCUM}x the rows"
            );
        }
    }
}

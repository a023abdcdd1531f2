//! The clipping norm taken stage by stage inside the backward (`NormPlace::InBackward`,
//! `seam::StagedNorm`) against the pass after it (`NormPlace::After`), 20 steps of the tiny
//! LM with clipping active: on the CPU the two give the same bits (weights and norms) for
//! one rank, and for DDP and ZeRO-1 on one rank (ZeRO-1 sums its one rank's shards in
//! parameter order). The step reports where it took the norm: in the backward where the
//! gradients are final there, after it where they are not (two ranks, accumulated
//! micro-batches, an f32 gradient sent as bf16). On one rank a bf16 wire sends nothing and
//! casts nothing: DDP and ZeRO-1 equal one process bit for bit. On two ranks with two
//! micro-batches, the sums sent as bf16 follow one process within the wire's rounding.

mod common;

use candle_core::DType;
use common::*;
use ddp::{shard_batch, Ddp, DdpOptions, Strategy};
use model::{AdamWConfig, Batch, StagedModel};
use std::sync::Arc;
use step::{NormPlace, StepOptions, TrainStep};
use zero1::Zero1Overlap;

const STEPS: u64 = 20;
const CLIP: f64 = 0.05;

type MakeStrategy = fn(&dyn StagedModel, Arc<dyn comm::Communicator>) -> Box<dyn step::Strategy>;

struct Run {
    weights: Vec<Vec<f32>>,
    norms: Vec<f64>,
    taken: Option<NormPlace>,
}

fn run(world: usize, accum: u64, norm: NormPlace, sync: MakeStrategy) -> Run {
    on_ranks(world, move |rank, comm| {
        let m = build(Kind::Lm, 0);
        let s = sync(m.as_ref(), comm);
        let opts = StepOptions {
            clip: CLIP,
            norm,
            ..StepOptions::default()
        };
        let mut st = TrainStep::new(m.as_ref(), s, AdamWConfig::default(), opts).unwrap();
        let mut norms = Vec::new();
        for s in 0..STEPS {
            let bs: Vec<Batch> = (0..accum)
                .map(|k| shard_batch(&global_batch(Kind::Lm, s * accum + k), rank, world).unwrap())
                .collect();
            let lr = 1e-3 * (1.0 + (s as f64 * 0.3).sin());
            norms.extend(
                st.step(m.as_ref(), &bs, lr)
                    .unwrap()
                    .map(|o| o.grad_norm.unwrap()),
            );
        }
        norms.push(st.flush().unwrap().unwrap().grad_norm.unwrap());
        Run {
            weights: weights(m.as_ref()),
            norms,
            taken: st.norm_taken(),
        }
    })
    .swap_remove(0)
}

fn local(_: &dyn StagedModel, _: Arc<dyn comm::Communicator>) -> Box<dyn step::Strategy> {
    Box::new(step::Local)
}
fn bucketed(m: &dyn StagedModel, c: Arc<dyn comm::Communicator>) -> Box<dyn step::Strategy> {
    let o = DdpOptions::new(Strategy::Bucketed { bucket_mb: 0.01 });
    Box::new(Ddp::new(c, m, o).unwrap())
}
fn bf16_wire(m: &dyn StagedModel, c: Arc<dyn comm::Communicator>) -> Box<dyn step::Strategy> {
    let mut o = DdpOptions::new(Strategy::Overlap);
    o.grad_dtype = Some(DType::BF16);
    Box::new(Ddp::new(c, m, o).unwrap())
}
fn zero1_bf16_wire(m: &dyn StagedModel, c: Arc<dyn comm::Communicator>) -> Box<dyn step::Strategy> {
    let mut o = DdpOptions::new(Strategy::Bucketed { bucket_mb: 0.01 });
    o.grad_dtype = Some(DType::BF16);
    let mut z = Zero1Overlap::new(c, m, o, AdamWConfig::default()).unwrap();
    z.set_gather_ahead(true);
    Box::new(z)
}
fn zero1(m: &dyn StagedModel, c: Arc<dyn comm::Communicator>) -> Box<dyn step::Strategy> {
    let s = Strategy::Bucketed { bucket_mb: 0.01 };
    let mut z = Zero1Overlap::new(c, m, s, AdamWConfig::default()).unwrap();
    z.set_gather_ahead(true);
    Box::new(z)
}

#[test]
fn the_norm_in_the_backward_equals_the_norm_after_it() {
    for (what, sync, tol) in [
        ("single", local as MakeStrategy, 0.0),
        ("ddp bucketed, 1 rank", bucketed, 0.0),
        ("zero1, 1 rank", zero1, 0.0),
    ] {
        let after = run(1, 1, NormPlace::After, sync);
        let inside = run(1, 1, NormPlace::InBackward, sync);
        assert_eq!(after.taken, Some(NormPlace::After), "{what}");
        assert_eq!(inside.taken, Some(NormPlace::InBackward), "{what}");
        assert_eq!(inside.norms.len(), after.norms.len());
        for (s, (a, b)) in inside.norms.iter().zip(&after.norms).enumerate() {
            assert!(
                (a - b).abs() <= tol * b,
                "{what}, step {s}: norm {a} vs {b}"
            );
        }
        assert!(
            inside.norms.iter().filter(|&&n| n > CLIP).count() > STEPS as usize / 2,
            "{what}: clipping active in too few steps: {:?}",
            inside.norms
        );
        let d = max_diff(&inside.weights, &after.weights);
        assert!(d <= tol as f32, "{what}: weights differ by {d:e}");
    }
}

#[test]
fn the_norm_is_taken_after_the_backward_where_gradients_are_not_final_there() {
    for (what, world, accum, sync) in [
        ("ddp, 2 ranks", 2, 1, bucketed as MakeStrategy),
        ("zero1, 2 ranks", 2, 1, zero1),
        ("single, 2 micro-batches", 1, 2, local),
        ("ddp, 2 micro-batches", 1, 2, bucketed),
        ("ddp, f32 gradients sent as bf16", 2, 1, bf16_wire),
    ] {
        let r = run(world, accum, NormPlace::InBackward, sync);
        assert_eq!(r.taken, Some(NormPlace::After), "{what}");
    }
}

/// On one rank nothing is sent: a bf16 wire casts no gradient, and DDP and ZeRO-1 train as
/// one process does, bit for bit, with the norm taken in the backward.
#[test]
fn on_one_rank_a_bf16_wire_changes_nothing() {
    let single = run(1, 1, NormPlace::After, local);
    for (what, sync, tol) in [
        ("ddp", bf16_wire as MakeStrategy, 0.0),
        ("zero1", zero1_bf16_wire, 0.0),
    ] {
        let r = run(1, 1, NormPlace::After, sync);
        for (s, (a, b)) in r.norms.iter().zip(&single.norms).enumerate() {
            assert!(
                (a - b).abs() <= tol * b,
                "{what}, step {s}: norm {a} vs {b}"
            );
        }
        let d = max_diff(&r.weights, &single.weights);
        assert!(
            d <= tol as f32,
            "{what}: weights differ by {d:e} from one process"
        );
        let inside = run(1, 1, NormPlace::InBackward, sync);
        assert_eq!(inside.taken, Some(NormPlace::InBackward), "{what}");
    }
}

/// Two ranks, two micro-batches, a bf16 wire: the last micro-batch's f32 sums go out as bf16
/// in one pass (`seam::accum::sum_new_as`). DDP and ZeRO-1 follow one process (f32, the same
/// two micro-batches of the whole batch) within the wire's rounding: the norms (taken before
/// clipping, so a sum that lost a micro-batch or its average shows) and the weights.
#[test]
fn accumulated_sums_sent_as_bf16_follow_one_process() {
    let single = run(1, 2, NormPlace::After, local);
    for (what, sync) in [
        ("ddp", bf16_wire as MakeStrategy),
        ("zero1", zero1_bf16_wire),
    ] {
        let r = run(2, 2, NormPlace::After, sync);
        let worst = r
            .norms
            .iter()
            .zip(&single.norms)
            .map(|(a, b)| (a - b).abs() / b)
            .fold(0.0, f64::max);
        let d = max_diff(&r.weights, &single.weights);
        eprintln!("{what}: worst relative norm difference {worst:e}, weights {d:e}");
        assert!(
            worst <= 1e-2,
            "{what}: norms differ by {worst:e} (relative)"
        );
        assert!(
            d <= 2e-3,
            "{what}: weights differ by {d:e} from one process"
        );
    }
}

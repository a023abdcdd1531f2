//! AdamW inside the backward with DDP (issue 33, item 4): without clipping, `TrainStep`
//! over `ddp::Ddp` updates each bucket's parameters as soon as its all-reduce is collected
//! (`Ddp::forward_backward_reduced`), and that equals AdamW after the backward bit for bit.
//! The tiny LM, 20 steps with a changing learning rate, on 1, 2 and 4 CPU ranks, eager
//! strategies (overlap, small buckets: launched during the backward, collected REDUCE_LAG
//! stages later) and flat (launched after it), with and without accumulation.

mod common;

use common::*;
use ddp::{shard_batch, Ddp, DdpOptions, Strategy};
use model::{AdamWConfig, Batch};
use step::{AdamwPlace, StepOptions, TrainStep};

const STEPS: u64 = 20;

/// Weights after `STEPS` steps, and the place AdamW ran, on rank 0.
fn run(
    world: usize,
    accum: u64,
    strategy: Strategy,
    adamw: AdamwPlace,
) -> (Vec<Vec<f32>>, AdamwPlace) {
    on_ranks(world, move |rank, comm| {
        let m = build(Kind::Lm, 0);
        let d = Ddp::new(comm, m.as_ref(), DdpOptions::new(strategy)).unwrap();
        let opts = StepOptions {
            adamw,
            ..StepOptions::default()
        };
        let mut st = TrainStep::new(m.as_ref(), Box::new(d), AdamWConfig::default(), opts).unwrap();
        for s in 0..STEPS {
            let bs: Vec<Batch> = (0..accum)
                .map(|k| shard_batch(&global_batch(Kind::Lm, s * accum + k), rank, world).unwrap())
                .collect();
            let lr = 1e-3 * (1.0 + (s as f64 * 0.3).sin());
            st.step(m.as_ref(), &bs, lr).unwrap();
        }
        st.flush().unwrap();
        (weights(m.as_ref()), st.adamw_place())
    })
    .swap_remove(0)
}

#[test]
fn ddp_adamw_in_the_backward_equals_adamw_after_it() {
    let small = Strategy::Bucketed { bucket_mb: 0.01 };
    for (world, accum, strategy) in [
        (1, 1, small),
        (2, 1, small),
        (2, 2, small),
        (2, 1, Strategy::Overlap),
        (2, 1, Strategy::Flat),
        (4, 1, small),
    ] {
        let what = format!("{world} ranks, {accum} micro-batches, {strategy:?}");
        let (after, p) = run(world, accum, strategy, AdamwPlace::After);
        assert_eq!(p, AdamwPlace::After, "{what}");
        let (inside, p) = run(world, accum, strategy, AdamwPlace::Auto);
        assert_eq!(p, AdamwPlace::InBackward, "{what}: auto without clipping");
        let d = max_diff(&inside, &after);
        assert_eq!(
            d, 0.0,
            "{what}: in the backward differs from after by {d:e}"
        );
    }
}

/// The probe (`TrainStep::set_probe`, `bench zero1`'s "before step" memory) fires right
/// before the optimizer update, so not at all where AdamW ran inside the backward: there it
/// would read after the update and report it as before.
#[test]
fn the_probe_fires_only_where_adamw_runs_after_the_backward() {
    for (adamw, local) in [
        (AdamwPlace::After, true),
        (AdamwPlace::Auto, true),
        (AdamwPlace::After, false),
        (AdamwPlace::Auto, false),
    ] {
        let calls = on_ranks(1, move |_, comm| {
            let m = build(Kind::Lm, 0);
            let sync: Box<dyn step::Strategy> = match local {
                true => Box::new(step::Local),
                false => {
                    let o = DdpOptions::new(Strategy::Bucketed { bucket_mb: 0.01 });
                    Box::new(Ddp::new(comm, m.as_ref(), o).unwrap())
                }
            };
            let opts = StepOptions {
                adamw,
                graph: false,
                ..StepOptions::default()
            };
            let mut st = TrainStep::new(m.as_ref(), sync, AdamWConfig::default(), opts).unwrap();
            let n = std::rc::Rc::new(std::cell::Cell::new(0));
            let seen = n.clone();
            st.set_probe(Some(Box::new(move || seen.set(seen.get() + 1))));
            for s in 0..3 {
                st.step(m.as_ref(), &[global_batch(Kind::Lm, s)], 1e-3)
                    .unwrap();
            }
            st.flush().unwrap();
            (n.get(), st.adamw_place())
        })
        .swap_remove(0);
        let want = match calls.1 {
            AdamwPlace::After => 3,
            _ => 0,
        };
        assert_eq!(
            calls.0, want,
            "{adamw:?}, local {local}: AdamW ran {:?}",
            calls.1
        );
    }
}

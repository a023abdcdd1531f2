//! Zero1Overlap (ZeRO-1 through ddp's reduce-scattering buckets) on the CPU backend: equal
//! to single-process AdamW on the whole batch for every bucket layout, identical on every
//! rank, each rank holding state for its slice of every bucket only.

#[path = "../../ddp/tests/common/mod.rs"]
mod common;

use common::*;
use ddp::{shard_batch, Strategy};
use model::AdamWConfig;
use zero1::Zero1Overlap;

const STEPS: u64 = 5;

fn train(kind: Kind, world: usize, strategy: Strategy) -> Vec<(Vec<Vec<f32>>, usize, usize)> {
    on_ranks(world, move |rank, comm| {
        // Other seeds on other ranks: the Ddp inside must broadcast rank 0's weights.
        let m = build(kind, rank as u64 * 13);
        let mut z = Zero1Overlap::new(comm, m.as_ref(), strategy, AdamWConfig::default()).unwrap();
        for s in 0..STEPS {
            let b = shard_batch(&global_batch(kind, s), rank, world).unwrap();
            z.forward_backward(m.as_ref(), &b).unwrap();
            z.step().unwrap();
        }
        let padded: usize = z
            .ddp()
            .buckets()
            .iter()
            .map(|b| b.numel.div_ceil(world))
            .sum();
        (weights(m.as_ref()), z.state_elements(), padded)
    })
}

#[test]
fn zero1_overlap_equals_single_process_adamw() {
    let strategies = [
        Strategy::Overlap,
        Strategy::Flat,
        Strategy::Bucketed { bucket_mb: 0.01 },
    ];
    for world in [2, 4] {
        for kind in [Kind::Toy, Kind::Lm] {
            let want = reference(kind, STEPS, 1);
            for strategy in strategies {
                let got = train(kind, world, strategy);
                for (r, (w, state, per_rank)) in got.iter().enumerate() {
                    let d = max_diff(w, &want);
                    assert!(
                        d <= 1e-5,
                        "{kind:?} {strategy:?} world {world} rank {r}: {d:e} from single-process AdamW"
                    );
                    assert_eq!(max_diff(w, &got[0].0), 0.0, "rank {r} differs from rank 0");
                    assert_eq!(state, per_rank, "rank {r}'s optimizer state");
                }
            }
        }
    }
}

#[test]
fn different_models_fail_on_every_rank() {
    let errs = on_ranks(2, |rank, comm| {
        let m = build(if rank == 0 { Kind::Toy } else { Kind::Lm }, 0);
        Zero1Overlap::new(comm, m.as_ref(), Strategy::Overlap, AdamWConfig::default())
            .err()
            .map(|e| e.to_string())
    });
    for e in errs {
        assert!(e.expect("accepted different models").contains("rank"));
    }
}

#[test]
fn step_without_backward_is_an_error() {
    let errs = on_ranks(1, |_, comm| {
        let m = build(Kind::Toy, 0);
        let mut z =
            Zero1Overlap::new(comm, m.as_ref(), Strategy::Overlap, AdamWConfig::default()).unwrap();
        z.step().unwrap_err().to_string()
    });
    assert!(
        errs[0].contains("no reduce-scattering backward in flight"),
        "{}",
        errs[0]
    );
}

//! Zero1 on the CPU backend: equal to single-process AdamW on the whole batch, identical
//! on every rank, each rank holding moments for its chunk only; bad input fails clearly.

// The shared fixtures: models, batches, reference training, one closure per rank.
mod common;

use common::*;
use ddp::shard_batch;
use model::AdamWConfig;
use zero1::Zero1;

const STEPS: u64 = 5;

fn train(kind: Kind, world: usize) -> Vec<(Vec<Vec<f32>>, usize, usize)> {
    on_ranks(world, move |rank, comm| {
        // Other seeds on other ranks: Zero1::new must copy rank 0's weights.
        let m = build(kind, rank as u64 * 11);
        let vars = m.params().vars().to_vec();
        let mut z = Zero1::new(comm, &vars, AdamWConfig::default()).unwrap();
        for s in 0..STEPS {
            let b = shard_batch(&global_batch(kind, s), rank, world).unwrap();
            let (_, g) = model::forward_backward(m.as_ref(), &b, |_, _| Ok(())).unwrap();
            z.step(&g).unwrap();
        }
        let numel = vars.iter().map(|v| v.elem_count()).sum();
        (weights(m.as_ref()), z.state_elements(), numel)
    })
}

#[test]
fn zero1_equals_single_process_adamw() {
    for world in [2, 4] {
        for kind in [Kind::Toy, Kind::Lm] {
            let want = reference(kind, STEPS, 1);
            let got = train(kind, world);
            for (r, (w, state, numel)) in got.iter().enumerate() {
                let d = max_diff(w, &want);
                assert!(
                    d <= 1e-5,
                    "{kind:?} world {world} rank {r}: {d:e} from single-process AdamW"
                );
                assert_eq!(max_diff(w, &got[0].0), 0.0, "rank {r} differs from rank 0");
                assert_eq!(*state, numel.div_ceil(world), "rank {r}'s optimizer chunk");
            }
        }
    }
}

#[test]
fn different_models_fail_on_every_rank() {
    let errs = on_ranks(2, |rank, comm| {
        let m = build(if rank == 0 { Kind::Toy } else { Kind::Lm }, 0);
        Zero1::new(comm, m.params().vars(), AdamWConfig::default())
            .err()
            .map(|e| e.to_string())
    });
    for e in errs {
        let e = e.expect("accepted different models");
        assert!(e.contains("rank 1 has"), "{e}");
    }
}

#[test]
fn a_missing_gradient_is_named() {
    let errs = on_ranks(1, |_, comm| {
        let m = build(Kind::Toy, 0);
        let mut z = Zero1::new(comm, m.params().vars(), AdamWConfig::default()).unwrap();
        let (_, mut g) =
            model::forward_backward(m.as_ref(), &global_batch(Kind::Toy, 0), |_, _| Ok(()))
                .unwrap();
        g[1] = None;
        z.step(&g).unwrap_err().to_string()
    });
    assert!(
        errs[0].contains("parameter 1 has no gradient"),
        "{}",
        errs[0]
    );
}

#[test]
fn parameters_in_another_order_on_one_rank_fail_on_every_rank_naming_it() {
    // Same count and elements on both ranks, listed in another order on rank 1.
    let errs = on_ranks(2, |rank, comm| {
        let m = build(Kind::Toy, 0);
        let mut vars = m.params().vars().to_vec();
        if rank == 1 {
            vars.reverse();
        }
        let z = Zero1::new(comm.clone(), &vars, AdamWConfig::default());
        let g = zero1::ShardedOptimizer::new(
            comm,
            vec![zero1::ParamGroup {
                params: vars,
                cfg: AdamWConfig::default(),
            }],
        );
        (
            z.err().map(|e| e.to_string()),
            g.err().map(|e| e.to_string()),
        )
    });
    for (r, (z, g)) in errs.iter().enumerate() {
        let z = z
            .as_deref()
            .unwrap_or_else(|| panic!("Zero1 on rank {r} accepted it"));
        assert!(
            z.contains("Zero1: parameter 0") && z.contains("rank 1"),
            "{z}"
        );
        let g = g
            .as_deref()
            .unwrap_or_else(|| panic!("ShardedOptimizer on rank {r} accepted it"));
        assert!(g.contains("ShardedOptimizer group 0: parameter 0"), "{g}");
    }
}

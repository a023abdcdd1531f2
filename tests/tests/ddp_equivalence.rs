//! DDP on the CPU backend ends with the weights of single-process training on the whole
//! batch, for every strategy, 2 and 4 ranks, the ToyModel and a tiny LM; identical on
//! every rank. Ranks start from different seeds: the initial broadcast must fix that.

mod common;
use common::*;
use ddp::{shard_batch, Ddp, DdpOptions, Strategy};
use model::{AdamWConfig, Batch};
use step::{StepOptions, TrainStep};

const STEPS: u64 = 5;

/// DDP through the step every path runs (`step::TrainStep` with `ddp::Ddp`): `micro`
/// micro-batches a step (no_sync, then the synchronising backward), AdamW after.
fn train(kind: Kind, world: usize, opts: DdpOptions, micro: u64) -> Vec<Vec<Vec<f32>>> {
    on_ranks(world, move |rank, comm| {
        let m = build(kind, rank as u64 * 17);
        let ddp = Ddp::new(comm, m.as_ref(), opts).unwrap();
        let cfg = AdamWConfig::default();
        let sync = Box::new(ddp);
        let mut st = TrainStep::new(m.as_ref(), sync, cfg, StepOptions::default()).unwrap();
        for s in 0..STEPS {
            let local: Vec<Batch> = (0..micro)
                .map(|k| shard_batch(&global_batch(kind, s * micro + k), rank, world).unwrap())
                .collect();
            st.step(m.as_ref(), &local, cfg.lr).unwrap();
        }
        st.flush().unwrap();
        weights(m.as_ref())
    })
}

fn strategies() -> Vec<Strategy> {
    vec![
        Strategy::Naive,
        Strategy::Flat,
        Strategy::Overlap,
        // Small enough that the tiny models get several buckets, some of several
        // parameters (ToyModel: [fc2], [ln.bias, ln.weight], [fc1]).
        Strategy::Bucketed { bucket_mb: 0.0002 },
        Strategy::Bucketed { bucket_mb: 0.004 },
    ]
}

fn check(kind: Kind, world: usize, opts: DdpOptions, micro: u64, tol: f32) {
    let want = reference(kind, STEPS, micro);
    let got = train(kind, world, opts, micro);
    for (r, w) in got.iter().enumerate() {
        let d = max_diff(w, &want);
        assert!(
            d <= tol,
            "{kind:?} {} world {world}: rank {r} differs from single-process by {d}",
            opts.strategy
        );
        assert_eq!(w, &got[0], "rank {r} differs from rank 0");
    }
    assert!(
        max_diff(&got[0], &reference(kind, 0, 1)) > 1e-3,
        "training moved nothing"
    );
}

#[test]
fn toy_model_every_strategy_2_and_4_ranks() {
    for world in [2, 4] {
        for s in strategies() {
            check(Kind::Toy, world, DdpOptions::new(s), 1, 1e-5);
        }
    }
}

#[test]
fn tiny_lm_every_strategy_2_and_4_ranks() {
    for world in [2, 4] {
        for s in strategies() {
            check(Kind::Lm, world, DdpOptions::new(s), 1, 1e-5);
        }
    }
}

/// A gradient reduced where it lies (no bucket copy), alone in its bucket or beside
/// copied ones, with and without accumulated micro-batches.
#[test]
fn gradients_reduced_in_place_every_strategy() {
    for s in strategies() {
        for micro in [1, 2] {
            check(Kind::Wide, 2, DdpOptions::new(s), micro, 1e-5);
        }
    }
}

/// Split DDP (ddp::split) with a gradient reduce-scattered in place: at 2 ranks each
/// launch's gathers run in the backward, or after the norm for the launches at the
/// model's first stage or at every stage (`late_gathers`, ddp::tail), their AdamW last.
#[test]
fn split_gradients_in_place_gathered_in_the_backward_or_late() {
    for late in [0, 1, usize::MAX] {
        for micro in [1, 2] {
            let s = Strategy::Bucketed { bucket_mb: 0.0002 };
            let opts = DdpOptions {
                split: true,
                late_gathers: Some(late),
                ..DdpOptions::new(s)
            };
            check(Kind::Wide, 2, opts, micro, 1e-5);
        }
    }
}

#[test]
fn gradient_accumulation_without_communication() {
    for s in [Strategy::Flat, Strategy::Bucketed { bucket_mb: 0.004 }] {
        check(Kind::Lm, 2, DdpOptions::new(s), 3, 1e-5);
    }
}

#[test]
fn bf16_gradient_communication_stays_close() {
    let opts = DdpOptions {
        strategy: Strategy::Bucketed { bucket_mb: 0.004 },
        grad_dtype: Some(candle_core::DType::BF16),
        ..DdpOptions::new(Strategy::Bucketed { bucket_mb: 0.004 })
    };
    check(Kind::Lm, 2, opts, 1, 2e-3);
}

/// AdamW hides a constant factor on the gradients (Sum instead of Avg would pass the
/// weight checks), so the averaged gradients themselves are compared too.
#[test]
fn averaged_gradients_equal_full_batch_gradients() {
    for kind in [Kind::Toy, Kind::Lm, Kind::Wide] {
        let want = full_batch_gradients(kind);
        let runs = strategies()
            .into_iter()
            .flat_map(|s| [false, true].map(|coalesce| (s, coalesce)));
        for world in [2, 4] {
            for (s, coalesce) in runs.clone() {
                let got = on_ranks(world, move |rank, comm| {
                    let m = build(kind, rank as u64 * 17);
                    let opts = DdpOptions {
                        coalesce,
                        ..DdpOptions::new(s)
                    };
                    let mut ddp = Ddp::new(comm, m.as_ref(), opts).unwrap();
                    let local = shard_batch(&global_batch(kind, 0), rank, world).unwrap();
                    ddp.forward_backward(m.as_ref(), &local).unwrap();
                    let g = flat(&ddp.finish_gradient_synchronization().unwrap());
                    (g, ddp.last_stats())
                });
                for (r, (g, stats)) in got.iter().enumerate() {
                    let d = max_diff(g, &want);
                    assert!(
                        d <= 1e-5,
                        "{kind:?} {s} coalesce {coalesce} world {world} rank {r}: gradients off by {d}"
                    );
                    assert_eq!(stats.collectives, ddp_buckets(kind, s));
                    assert_eq!(stats.launched_during_backward > 0, s.eager());
                }
            }
        }
    }
}

/// `DdpOptions::gather_rows` (ddp::rows): the tiny LM's embedding gradient comes from every
/// rank's gathered rows, not from its bucket (one collective fewer), and the averaged
/// gradients still equal the full batch's on every rank, bit for bit alike; training with
/// it ends where single-process training does.
#[test]
fn the_embedding_gradient_from_gathered_rows_equals_the_full_batch_gradient() {
    let kind = Kind::Lm;
    let want = full_batch_gradients(kind);
    let s = Strategy::Bucketed { bucket_mb: 0.004 };
    for world in [2, 4] {
        let got = on_ranks(world, move |rank, comm| {
            let m = build(kind, rank as u64 * 17);
            let opts = DdpOptions {
                gather_rows: true,
                ..DdpOptions::new(s)
            };
            let mut ddp = Ddp::new(comm, m.as_ref(), opts).unwrap();
            let local = shard_batch(&global_batch(kind, 0), rank, world).unwrap();
            ddp.forward_backward(m.as_ref(), &local).unwrap();
            let g = flat(&ddp.finish_gradient_synchronization().unwrap());
            (g, ddp.last_stats().collectives, ddp.buckets().len())
        });
        for (r, (g, collectives, buckets)) in got.iter().enumerate() {
            let d = max_diff(g, &want);
            assert!(d <= 1e-5, "world {world} rank {r}: gradients off by {d}");
            assert_eq!(*collectives, buckets - 1, "the table's bucket was launched");
            assert_eq!(g, &got[0].0, "rank {r} differs from rank 0");
        }
        // Trained through the step without clipping: AdamW inside the backward takes the
        // table's gradient last (Ddp::forward_backward_reduced).
        let opts = DdpOptions {
            gather_rows: true,
            ..DdpOptions::new(s)
        };
        check(kind, world, opts, 1, 1e-5);
    }
}

/// One process's gradients of `kind`'s global batch 0, flattened.
fn full_batch_gradients(kind: Kind) -> Vec<Vec<f32>> {
    let m = build(kind, 0);
    let b = global_batch(kind, 0);
    flat(
        &model::forward_backward(m.as_ref(), &b, |_, _| Ok(()))
            .unwrap()
            .1,
    )
}

/// Every gradient flattened to f32 values.
fn flat(grads: &model::Grads) -> Vec<Vec<f32>> {
    let one = |g: &Option<candle_core::Tensor>| g.as_ref().unwrap().flatten_all().unwrap();
    grads.iter().map(|g| one(g).to_vec1().unwrap()).collect()
}

fn ddp_buckets(kind: Kind, s: Strategy) -> usize {
    on_ranks(1, move |_, comm| {
        let m = build(kind, 0);
        Ddp::new(comm, m.as_ref(), DdpOptions::new(s))
            .unwrap()
            .buckets()
            .len()
    })[0]
}

/// Coalescing the buckets that become ready together changes how they are launched, not
/// what they compute; and it really launches fewer: overlap, once per stage.
#[test]
fn coalesced_launches_train_the_same() {
    let coalesced = |s| DdpOptions {
        coalesce: true,
        ..DdpOptions::new(s)
    };
    for world in [2, 4] {
        for s in strategies() {
            check(Kind::Toy, world, coalesced(s), 1, 1e-5);
            check(Kind::Lm, world, coalesced(s), 1, 1e-5);
        }
    }
    check(Kind::Lm, 2, coalesced(Strategy::Overlap), 3, 1e-5);
    let stats = on_ranks(2, move |rank, comm| {
        let m = build(Kind::Lm, 0);
        let opts = coalesced(Strategy::Overlap);
        let mut ddp = Ddp::new(comm, m.as_ref(), opts).unwrap();
        let local = shard_batch(&global_batch(Kind::Lm, 0), rank, 2).unwrap();
        ddp.forward_backward(m.as_ref(), &local).unwrap();
        ddp.finish_gradient_synchronization().unwrap();
        (ddp.last_stats(), m.params().len(), m.num_stages())
    });
    for (s, params, stages) in stats {
        assert_eq!(s.collectives, params, "{s:?}");
        assert_eq!(s.launches, stages, "{s:?}");
    }
}

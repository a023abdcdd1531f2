//! Zero1Overlap (ZeRO-1 through ddp's reduce-scattering buckets) on the CPU backend: equal
//! to single-process AdamW on the whole batch for every bucket layout, identical on every
//! rank, each rank holding state for its slice of every bucket only.

// The shared fixtures: models, batches, reference training, one closure per rank.
mod common;

use common::*;
use ddp::{shard_batch, Strategy};
use model::AdamWConfig;
use step::{StepOptions, TrainStep};
use zero1::Zero1Overlap;

const STEPS: u64 = 5;

/// With `ahead`, every step leaves its all-gathers to the next forward (so each forward
/// must collect them stage by stage, or the trajectory differs); `sync_params` at the end.
/// With `coalesce`, the buckets ready at one stage are reduce-scattered in one launch.
fn train(
    kind: Kind,
    world: usize,
    strategy: Strategy,
    (ahead, coalesce): (bool, bool),
) -> Vec<(Vec<Vec<f32>>, usize, usize)> {
    on_ranks(world, move |rank, comm| {
        // Other seeds on other ranks: the Ddp inside must broadcast rank 0's weights.
        let m = build(kind, rank as u64 * 13);
        let cfg = AdamWConfig::default();
        let mut z = Zero1Overlap::new(comm, m.as_ref(), strategy, cfg).unwrap();
        z.set_gather_ahead(ahead);
        z.set_coalesce(coalesce);
        // Through the step every path runs (step::TrainStep); flush() collects the
        // all-gathers left in flight.
        let sync = Box::new(z);
        let mut st = TrainStep::new(m.as_ref(), sync, cfg, StepOptions::default()).unwrap();
        for s in 0..STEPS {
            let b = shard_batch(&global_batch(kind, s), rank, world).unwrap();
            st.step(m.as_ref(), &[b], cfg.lr).unwrap();
        }
        st.flush().unwrap();
        let z: &Zero1Overlap = st.strategy_as().expect("built as Zero1Overlap");
        // Per bucket: its slice of the flat part (padded), and 1/W of each parameter
        // sharded in place.
        let d = z.ddp();
        let numel = |i: usize| m.params().var(i).elem_count();
        let padded: usize = d
            .buckets()
            .iter()
            .map(|b| {
                let (sharded, flat): (Vec<usize>, Vec<usize>) =
                    b.params.iter().partition(|&&i| d.shards_in_place(i));
                let flat: usize = flat.into_iter().map(numel).sum();
                flat.div_ceil(world) + sharded.into_iter().map(numel).sum::<usize>() / world
            })
            .sum();
        let in_place = (0..m.params().len()).any(|i| d.shards_in_place(i));
        assert_eq!(
            in_place,
            kind == Kind::Wide && world == 2,
            "70,010 elements shard in place on 2 ranks, not 4"
        );
        (weights(m.as_ref()), z.state_elements(), padded)
    })
}

#[test]
fn zero1_overlap_equals_single_process_adamw() {
    let small = Strategy::Bucketed { bucket_mb: 0.01 };
    let strategies = [Strategy::Overlap, Strategy::Flat, small];
    for world in [2, 4] {
        for kind in [Kind::Toy, Kind::Lm, Kind::Wide] {
            let want = reference(kind, STEPS, 1);
            let modes = [(false, false), (true, false), (false, true)];
            for (strategy, mode) in strategies.into_iter().flat_map(|s| modes.map(|m| (s, m))) {
                let got = train(kind, world, strategy, mode);
                let (ahead, coalesce) = mode;
                for (r, (w, state, per_rank)) in got.iter().enumerate() {
                    let d = max_diff(w, &want);
                    assert!(
                        d <= 1e-5,
                        "{kind:?} {strategy:?} ahead {ahead} coalesce {coalesce} world {world} rank {r}: {d:e} from single-process AdamW"
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

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("zero1-ov-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Steps `from..to` with Zero1Overlap (`strategy`) on `world` ranks, resuming from `load`
/// if given, saving to `save` if given; returns rank 0's weights.
fn run_ov(
    kind: Kind,
    world: usize,
    strategy: Strategy,
    (from, to): (u64, u64),
    load: Option<std::path::PathBuf>,
    save: Option<std::path::PathBuf>,
) -> Vec<Vec<f32>> {
    on_ranks(world, move |rank, comm| {
        let m = build(kind, rank as u64 * 7 + if load.is_some() { 100 } else { 0 });
        let cfg = AdamWConfig::default();
        let mut z = match &load {
            Some(d) => Zero1Overlap::resume(comm, m.as_ref(), strategy, cfg, d).unwrap(),
            None => Zero1Overlap::new(comm, m.as_ref(), strategy, cfg).unwrap(),
        };
        for s in from..to {
            let b = shard_batch(&global_batch(kind, s), rank, world).unwrap();
            z.forward_backward(m.as_ref(), &b).unwrap();
            z.step().unwrap();
        }
        if let Some(d) = &save {
            z.save(d).unwrap();
        }
        weights(m.as_ref())
    })
    .swap_remove(0)
}

#[test]
fn checkpoints_resume_on_any_world_size_bucket_layout_and_zero1() {
    let want = reference(Kind::Lm, 5, 1);
    let small = Strategy::Bucketed { bucket_mb: 0.01 };
    let dir = tmp("resume");
    run_ov(Kind::Lm, 2, small, (0, 3), None, Some(dir.clone()));
    // Same layout, another world size and another bucket plan: same trajectory.
    for (world, strategy) in [(2, small), (4, Strategy::Overlap), (1, Strategy::Flat)] {
        let got = run_ov(Kind::Lm, world, strategy, (3, 5), Some(dir.clone()), None);
        let d = max_diff(&got, &want);
        assert!(
            d <= 1e-5,
            "world {world} {strategy:?}: {d:e} from single-process AdamW"
        );
    }
    // The flat Zero1 reads the same checkpoint (the shards' runs map to flat positions).
    let got = on_ranks(2, {
        let dir = dir.clone();
        move |rank, comm| {
            let m = build(Kind::Lm, 100 + rank as u64);
            let vars = m.params().vars().to_vec();
            let mut z = zero1::Zero1::resume(comm, &vars, AdamWConfig::default(), &dir).unwrap();
            for s in 3..5 {
                let b = shard_batch(&global_batch(Kind::Lm, s), rank, 2).unwrap();
                let (_, g) = model::forward_backward(m.as_ref(), &b, |_, _| Ok(())).unwrap();
                z.step(&g).unwrap();
            }
            weights(m.as_ref())
        }
    });
    assert!(
        max_diff(&got[0], &want) <= 1e-5,
        "Zero1 from a Zero1Overlap checkpoint"
    );
    // And consolidated.
    zero1::checkpoint::consolidate(&dir, &shapes_of(build(Kind::Lm, 0).as_ref())).unwrap();
    for f in std::fs::read_dir(&dir).unwrap().flatten() {
        if f.file_name().to_string_lossy().starts_with("shard-") {
            std::fs::remove_file(f.path()).unwrap();
        }
    }
    let got = run_ov(Kind::Lm, 4, small, (3, 5), Some(dir.clone()), None);
    assert!(max_diff(&got, &want) <= 1e-5, "from the consolidated state");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn in_place_shards_resume_as_flat_ones_and_back() {
    // Wide's 70,010-element layer is sharded in place on 2 ranks (and 1), and goes
    // through the flat buffer on 4: the checkpoint's runs carry it between the two.
    let want = reference(Kind::Wide, 5, 1);
    for (first, then) in [(2, [4, 1]), (4, [2, 1])] {
        let dir = tmp(&format!("wide-{first}"));
        run_ov(
            Kind::Wide,
            first,
            Strategy::Overlap,
            (0, 3),
            None,
            Some(dir.clone()),
        );
        for world in then {
            let got = run_ov(
                Kind::Wide,
                world,
                Strategy::Overlap,
                (3, 5),
                Some(dir.clone()),
                None,
            );
            let d = max_diff(&got, &want);
            assert!(d <= 1e-5, "saved on {first}, resumed on {world}: {d:e}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

fn shapes_of(m: &(dyn model::StagedModel + Send)) -> Vec<Vec<usize>> {
    m.params()
        .vars()
        .iter()
        .map(|v| v.dims().to_vec())
        .collect()
}

#[test]
fn resuming_another_models_checkpoint_fails_every_rank_and_writes_nothing() {
    let dir = tmp("other");
    on_ranks(2, {
        let dir = dir.clone();
        move |_, comm| {
            let m = build(Kind::Toy, 0);
            let mut z =
                Zero1Overlap::new(comm, m.as_ref(), Strategy::Overlap, AdamWConfig::default())
                    .unwrap();
            z.save(&dir).unwrap();
        }
    });
    let files = |d: &std::path::Path| {
        let mut v: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| {
                let p = e.unwrap().path();
                (p.clone(), std::fs::read(p).unwrap())
            })
            .collect();
        v.sort();
        v
    };
    let before = files(&dir);
    let errs = on_ranks(2, {
        let dir = dir.clone();
        move |_, comm| {
            let m = build(Kind::Lm, 0);
            Zero1Overlap::resume(
                comm,
                m.as_ref(),
                Strategy::Overlap,
                AdamWConfig::default(),
                &dir,
            )
            .err()
            .map(|e| e.to_string())
            .expect("resumed another model's checkpoint")
        }
    });
    for e in errs {
        assert!(e.contains("from another model"), "{e}");
    }
    assert_eq!(files(&dir), before, "resume wrote into the checkpoint");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Gather-ahead leaves the parameters of a multi-parameter bucket (`Flat`: one bucket)
/// stale after `step` (on the CPU backend the gathered values wait in the pending bucket)
/// until `sync_params` or the next forward. One-parameter buckets are gathered in place.
#[test]
fn gather_ahead_parameters_are_stale_until_synced() {
    let out = on_ranks(2, |rank, comm| {
        let m = build(Kind::Toy, 0);
        let mut z =
            Zero1Overlap::new(comm, m.as_ref(), Strategy::Flat, AdamWConfig::default()).unwrap();
        z.set_gather_ahead(true);
        let b = shard_batch(&global_batch(Kind::Toy, 0), rank, 2).unwrap();
        z.forward_backward(m.as_ref(), &b).unwrap();
        let before = weights(m.as_ref());
        z.step().unwrap();
        let stale = weights(m.as_ref());
        z.sync_params().unwrap();
        (
            max_diff(&stale, &before),
            max_diff(&weights(m.as_ref()), &before),
        )
    });
    for (stale, synced) in out {
        assert_eq!(stale, 0.0, "parameters changed before sync_params");
        assert!(synced > 0.0, "sync_params did not apply the step");
    }
}

/// ZeRO-2 (`DdpOptions::release_gradients`): during the backward each bucket's
/// reduce-scatter is collected two stages after its launch (its full gradients then
/// freed), so that only the last stages' launches are in flight when it ends; without it
/// every launch is. The step is the same either way (step_reference.rs).
#[test]
fn zero2_collects_buckets_during_the_backward() {
    let pending = |release: bool| {
        on_ranks(2, move |rank, comm| {
            let m = build(Kind::Lm, 0);
            let o = ddp::DdpOptions {
                release_gradients: release,
                ..ddp::DdpOptions::new(Strategy::Bucketed { bucket_mb: 0.01 })
            };
            let mut z = Zero1Overlap::new(comm, m.as_ref(), o, AdamWConfig::default()).unwrap();
            let b = shard_batch(&global_batch(Kind::Lm, 0), rank, 2).unwrap();
            z.forward_backward_observed(m.as_ref(), &b, |_, _| Ok(()))
                .unwrap();
            let p = z.ddp().pending();
            // The buckets of stages 0 and 1: launched last, within two stages of the end.
            let last = z
                .ddp()
                .buckets()
                .iter()
                .filter(|b| b.ready_stage < 2)
                .count();
            z.step().unwrap();
            (p, m.num_stages(), last)
        })
        .remove(0)
    };
    let ((all, none), stages, last) = pending(false);
    assert_eq!(none, 0, "ZeRO-1 collects nothing during the backward");
    assert!(
        all >= stages,
        "{all} launches in flight over {stages} stages"
    );
    let ((left, early), _, _) = pending(true);
    assert_eq!(left + early, all, "every bucket once");
    assert_eq!(
        left, last,
        "in flight: the buckets of the last two stages only"
    );
    assert!(early > 0, "nothing collected during the backward");
}

//! ShardedOptimizer on the CPU backend: equal to unsharded AdamW training, including after
//! an add_param_group in mid-training; bad input fails on every rank.

// The shared fixtures: models, batches, reference training, one closure per rank.
mod common;

use candle_core::Var;
use common::*;
use ddp::{shard_batch, Ddp, DdpOptions, Strategy};
use model::{AdamW, AdamWConfig};
use zero1::{ParamGroup, ShardedOptimizer};

const STEPS: u64 = 5;

fn group(params: &[Var], lr: f64) -> ParamGroup {
    ParamGroup {
        params: params.to_vec(),
        cfg: AdamWConfig {
            lr,
            ..AdamWConfig::default()
        },
    }
}

/// DDP (flat) + ShardedOptimizer; the second group (params from `split`) joins at step
/// `join` with learning rate 5e-4. Returns (weights, owned elements, total elements).
fn sharded(
    kind: Kind,
    world: usize,
    split: usize,
    join: u64,
) -> Vec<(Vec<Vec<f32>>, usize, usize)> {
    on_ranks(world, move |rank, comm| {
        let m = build(kind, 0);
        let vars = m.params().vars().to_vec();
        let mut d = Ddp::new(comm.clone(), m.as_ref(), DdpOptions::new(Strategy::Flat)).unwrap();
        let mut opt =
            ShardedOptimizer::new(comm.clone(), vec![group(&vars[..split], 1e-3)]).unwrap();
        for s in 0..STEPS {
            if s == join && split < vars.len() {
                opt.add_param_group(group(&vars[split..], 5e-4)).unwrap();
            }
            let b = shard_batch(&global_batch(kind, s), rank, world).unwrap();
            d.forward_backward(m.as_ref(), &b).unwrap();
            let g = d.finish_gradient_synchronization().unwrap();
            opt.step(&vars, &g).unwrap();
        }
        let total = vars.iter().map(|v| v.elem_count()).sum();
        (weights(m.as_ref()), opt.owned_elements(), total)
    })
}

/// Single process, unsharded: AdamW on the first group, a second AdamW from step `join`.
fn unsharded(kind: Kind, split: usize, join: u64) -> Vec<Vec<f32>> {
    let m = build(kind, 0);
    let vars = m.params().vars().to_vec();
    let mut a = AdamW::new(group(&[], 1e-3).cfg).unwrap();
    let mut b = AdamW::new(group(&[], 5e-4).cfg).unwrap();
    for s in 0..STEPS {
        let (_, g) =
            model::forward_backward(m.as_ref(), &global_batch(kind, s), |_, _| Ok(())).unwrap();
        a.step(&vars[..split], &g[..split]).unwrap();
        if s >= join {
            b.step(&vars[split..], &g[split..]).unwrap();
        }
    }
    weights(m.as_ref())
}

fn check(kind: Kind, world: usize, split: usize, join: u64) {
    let want = unsharded(kind, split, join);
    let got = sharded(kind, world, split, join);
    for (r, (w, owned, total)) in got.iter().enumerate() {
        let diff = max_diff(w, &want);
        assert!(
            diff <= 1e-5,
            "{kind:?} world {world} rank {r}: {diff:e} from unsharded AdamW"
        );
        assert_eq!(max_diff(w, &got[0].0), 0.0, "rank {r} differs from rank 0");
        assert!(
            *owned < *total,
            "rank {r} keeps state for everything ({owned} of {total})"
        );
    }
    let owned: usize = got.iter().map(|g| g.1).sum();
    assert_eq!(owned, got[0].2, "every parameter has exactly one owner");
}

#[test]
fn sharded_training_equals_unsharded_adamw() {
    for world in [2, 4] {
        for kind in [Kind::Lm, Kind::Toy] {
            let n = build(kind, 0).params().len();
            check(kind, world, n, STEPS);
        }
    }
}

#[test]
fn a_group_added_mid_training_is_stepped_and_balanced() {
    let n = build(Kind::Lm, 0).params().len();
    check(Kind::Lm, 2, n / 2, 2);
    check(Kind::Lm, 4, n / 3, 3);
}

#[test]
fn ranks_adding_different_groups_fail_everywhere() {
    let errs = on_ranks(2, |rank, comm| {
        let m = build(Kind::Toy, 0);
        let vars = m.params().vars().to_vec();
        let k = if rank == 0 { 3 } else { 2 };
        ShardedOptimizer::new(comm, vec![group(&vars[..k], 1e-3)])
            .err()
            .map(|e| e.to_string())
    });
    for e in errs {
        let e = e.expect("accepted different groups");
        assert!(e.contains("rank 1 adds group"), "{e}");
    }
}

#[test]
fn a_step_without_a_grouped_parameter_names_it() {
    let errs = on_ranks(1, |_, comm| {
        let m = build(Kind::Toy, 0);
        let vars = m.params().vars().to_vec();
        let mut opt = ShardedOptimizer::new(comm, vec![group(&vars, 1e-3)]).unwrap();
        let (_, g) =
            model::forward_backward(m.as_ref(), &global_batch(Kind::Toy, 0), |_, _| Ok(()))
                .unwrap();
        opt.step(&vars[1..], &g[1..]).unwrap_err().to_string()
    });
    assert!(
        errs[0].contains("parameter 0 of group 0 is not among"),
        "{}",
        errs[0]
    );
}

/// DDP + ShardedOptimizer over steps `from..to` (group 2 joins at step 2), resuming from
/// `load` and saving to `save` if given; rank 0's weights.
fn sharded_ckpt(
    world: usize,
    split: usize,
    (from, to): (u64, u64),
    load: Option<std::path::PathBuf>,
    save: Option<std::path::PathBuf>,
) -> Vec<Vec<f32>> {
    let kind = Kind::Lm;
    on_ranks(world, move |rank, comm| {
        let m = build(kind, if load.is_some() { 50 + rank as u64 } else { 0 });
        let vars = m.params().vars().to_vec();
        let mut d = Ddp::new(comm.clone(), m.as_ref(), DdpOptions::new(Strategy::Flat)).unwrap();
        let groups = |joined: bool| {
            let mut g = vec![group(&vars[..split], 1e-3)];
            if joined {
                g.push(group(&vars[split..], 5e-4));
            }
            g
        };
        let mut opt = match &load {
            Some(dir) => ShardedOptimizer::resume(comm.clone(), groups(from >= 2), dir).unwrap(),
            None => ShardedOptimizer::new(comm.clone(), groups(false)).unwrap(),
        };
        for s in from..to {
            if s == 2 && from < 2 {
                opt.add_param_group(group(&vars[split..], 5e-4)).unwrap();
            }
            let b = shard_batch(&global_batch(kind, s), rank, world).unwrap();
            d.forward_backward(m.as_ref(), &b).unwrap();
            let g = d.finish_gradient_synchronization().unwrap();
            opt.step(&vars, &g).unwrap();
        }
        if let Some(dir) = &save {
            opt.save(dir).unwrap();
        }
        weights(m.as_ref())
    })
    .swap_remove(0)
}

#[test]
fn checkpoints_resume_groups_with_their_own_step_counts_on_any_world_size() {
    let split = 5;
    let want = unsharded(Kind::Lm, split, 2);
    let dir = std::env::temp_dir().join(format!("zero1-sharded-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    sharded_ckpt(2, split, (0, 4), None, Some(dir.clone()));
    for world in [2, 4, 1] {
        let got = sharded_ckpt(world, split, (4, 5), Some(dir.clone()), None);
        let d = max_diff(&got, &want);
        assert!(d <= 1e-5, "world {world}: {d:e} from unsharded AdamW");
    }
    // Passing one group fewer or more than the checkpoint holds is an error on every rank.
    let errs = on_ranks(2, {
        let dir = dir.clone();
        move |_, comm| {
            let m = build(Kind::Lm, 0);
            let vars = m.params().vars().to_vec();
            ShardedOptimizer::resume(comm, vec![group(&vars[..split], 1e-3)], &dir)
                .err()
                .map(|e| e.to_string())
        }
    });
    for e in errs {
        let e = e.expect("resumed with a missing group");
        assert!(
            e.contains("more than the 1 groups") || e.contains("failed on rank"),
            "{e}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

//! DDP checkpoints (Ddp::save / Ddp::resume: parameters, AdamW moments, step count):
//! training 3 steps, saving, resuming into a freshly built model (another seed) and
//! optimizer, and training 3 more equals training 6 steps straight through, bit for bit,
//! on 2 and 4 CPU ranks, ToyModel and the tiny LM. A checkpoint of another model is
//! refused on every rank, naming the parameter, before anything changes.

mod common;
use common::*;
use ddp::{shard_batch, Ddp, DdpOptions, Strategy};
use model::{AdamW, AdamWConfig};
use std::path::PathBuf;

const STEPS: u64 = 6;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ddp-ck-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn opts() -> DdpOptions {
    DdpOptions::new(Strategy::Bucketed { bucket_mb: 0.004 })
}

/// Trains steps [from, to) on every rank; with `save_at`, saves after that many steps;
/// with `resume`, starts from the checkpoint in `dir` (from = its step).
fn run(
    kind: Kind,
    world: usize,
    dir: PathBuf,
    save_at: Option<u64>,
    resume: bool,
) -> Vec<Vec<Vec<f32>>> {
    on_ranks(world, move |rank, comm| {
        let m = build(kind, 100 + rank as u64 * 7);
        let mut ddp = Ddp::new(comm, m.as_ref(), opts()).unwrap();
        let mut opt = AdamW::new(AdamWConfig::default()).unwrap();
        let from = if resume {
            ddp.resume(&dir, m.as_ref(), &mut opt).unwrap()
        } else {
            0
        };
        let to = save_at.unwrap_or(STEPS);
        for s in from..to {
            let local = shard_batch(&global_batch(kind, s), rank, world).unwrap();
            ddp.forward_backward(m.as_ref(), &local).unwrap();
            let grads = ddp.finish_gradient_synchronization().unwrap();
            opt.step(m.params().vars(), &grads).unwrap();
        }
        if save_at.is_some() {
            ddp.save(&dir, m.as_ref(), &opt).unwrap();
        }
        weights(m.as_ref())
    })
}

#[test]
fn resuming_equals_training_straight_through_bit_for_bit() {
    for kind in [Kind::Toy, Kind::Lm] {
        for world in [2, 4] {
            let dir = tmp(&format!("{kind:?}-{world}"));
            let straight = run(kind, world, dir.clone(), None, false);
            let saved = run(kind, world, dir.clone(), Some(3), false);
            assert_ne!(
                saved[0], straight[0],
                "the first half moved less than the whole"
            );
            let resumed = run(kind, world, dir.clone(), None, true);
            for r in 0..world {
                assert_eq!(resumed[r], straight[r], "{kind:?} world {world} rank {r}");
            }
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
}

#[test]
fn a_checkpoint_of_another_model_is_refused_on_every_rank_naming_the_parameter() {
    let dir = tmp("other");
    run(Kind::Toy, 2, dir.clone(), Some(1), false);
    let errs = on_ranks(2, {
        let dir = dir.clone();
        move |_, comm| {
            let m = build(Kind::Lm, 0);
            let before = weights(m.as_ref());
            let mut ddp = Ddp::new(comm, m.as_ref(), opts()).unwrap();
            let mut opt = AdamW::new(AdamWConfig::default()).unwrap();
            let e = ddp
                .resume(&dir, m.as_ref(), &mut opt)
                .err()
                .unwrap()
                .to_string();
            assert_eq!(weights(m.as_ref()), before, "nothing changed");
            assert_eq!(opt.steps_taken(), 0);
            e
        }
    });
    for e in errs {
        assert!(
            e.contains("no parameter") && e.contains("ddp.safetensors"),
            "{e}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_rank_reads_only_the_moments_of_the_runs_it_keeps() {
    let dir = tmp("runs");
    run(Kind::Lm, 2, dir.clone(), Some(2), false);
    let m = build(Kind::Lm, 0);
    let n: usize = m.params().vars().iter().map(|v| v.elem_count()).sum();
    let read = |want: &[(usize, usize)]| ddp::checkpoint::read_flat(&dir, m.as_ref(), want);
    let (params, all) = read(&[(0, n)]).unwrap();
    let (all_m, all_v) = all.moments(0, n).unwrap();
    assert!(all_m.iter().any(|&x| x != 0.0), "no moments were read");
    // Runs across parameters' boundaries, in any order.
    let want = [(n - 7, 7), (3, n / 2), (n / 2 + 10, 1)];
    let (params2, part) = read(&want).unwrap();
    assert_eq!(params.len(), params2.len());
    assert_eq!(part.step, 2);
    for (s, l) in want {
        let (pm, pv) = part.moments(s, l).unwrap();
        assert_eq!(
            (&pm[..], &pv[..]),
            (&all_m[s..s + l], &all_v[s..s + l]),
            "{s}..{}",
            s + l
        );
    }
    let e = part.moments(0, 4).err().unwrap().to_string();
    assert!(e.contains("elements 0..4 were not read"), "{e}");
    let e = read(&[(n - 1, 2)]).err().unwrap().to_string();
    assert!(e.contains("overlap or pass the model's"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

//! Zero1 checkpoints: resuming (same world size, another world size, consolidated)
//! continues the single-process trajectory; bad checkpoints fail on every rank and leave
//! the files as they were.

// The shared fixtures: models, batches, reference training, one closure per rank.
mod common;

use common::*;
use ddp::shard_batch;
use model::AdamWConfig;
use std::path::{Path, PathBuf};
use zero1::{checkpoint, Zero1};

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("zero1-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Steps `from..to` on `world` ranks, resuming from `load` if given, saving to `save`.
fn run(
    kind: Kind,
    world: usize,
    from: u64,
    to: u64,
    load: Option<&Path>,
    save: Option<&Path>,
) -> Vec<Vec<Vec<f32>>> {
    let (load, save) = (load.map(Path::to_path_buf), save.map(Path::to_path_buf));
    on_ranks(world, move |rank, comm| {
        // Other weights on every rank: a fresh run takes rank 0's (the reference's seed
        // 0), a resumed one must overwrite them all from the checkpoint.
        let seed = rank as u64 * 7 + if load.is_some() { 100 } else { 0 };
        let m = build(kind, seed);
        let vars = m.params().vars().to_vec();
        let cfg = AdamWConfig::default();
        let mut z = match &load {
            Some(d) => Zero1::resume(comm, &vars, cfg, d).unwrap(),
            None => Zero1::new(comm, &vars, cfg).unwrap(),
        };
        for s in from..to {
            let b = shard_batch(&global_batch(kind, s), rank, world).unwrap();
            let (_, g) = model::forward_backward(m.as_ref(), &b, |_, _| Ok(())).unwrap();
            z.step(&g).unwrap();
        }
        if let Some(d) = &save {
            z.save(d).unwrap();
        }
        weights(m.as_ref())
    })
}

#[test]
fn resuming_continues_the_trajectory_on_any_world_size() {
    let kind = Kind::Lm;
    let want = reference(kind, 5, 1);
    let dir = tmp("resume");
    run(kind, 2, 0, 3, None, Some(&dir));
    for world in [2, 4] {
        let got = run(kind, world, 3, 5, Some(&dir), None);
        for (r, w) in got.iter().enumerate() {
            let d = max_diff(w, &want);
            assert!(
                d <= 1e-5,
                "resumed on {world} ranks, rank {r}: {d:e} from uninterrupted training"
            );
        }
    }
    // Consolidated into one optimizer file (the shards go with it), resumed on 1 rank.
    let shapes: Vec<Vec<usize>> = build(kind, 0)
        .params()
        .vars()
        .iter()
        .map(|v| v.dims().to_vec())
        .collect();
    checkpoint::consolidate(&dir, &shapes).unwrap();
    for r in 0..2 {
        assert!(!dir.join(format!("shard-{r}-of-2.safetensors")).exists());
    }
    let got = run(kind, 1, 3, 5, Some(&dir), None);
    assert!(
        max_diff(&got[0], &want) <= 1e-5,
        "consolidated resume on 1 rank"
    );
    // Saving again into the consolidated checkpoint's directory: its optimizer file
    // belonged to the replaced checkpoint and goes, so the new shards are what resumes.
    run(kind, 2, 0, 4, None, Some(&dir));
    assert!(!dir.join("optimizer.safetensors").exists());
    let got = run(kind, 2, 4, 5, Some(&dir), None);
    assert!(max_diff(&got[0], &want) <= 1e-5, "resumed from the re-save");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_complete_checkpoint_resumes_bit_for_bit_on_two_and_four_ranks() {
    let kind = Kind::Lm;
    for world in [2, 4] {
        let dir = tmp(&format!("bits-{world}"));
        let straight = run(kind, world, 0, 4, None, None);
        run(kind, world, 0, 2, None, Some(&dir));
        let resumed = run(kind, world, 2, 4, Some(&dir), None);
        assert!(
            resumed == straight,
            "{world} ranks: resumed differs from uninterrupted by {:e}",
            max_diff(&resumed[0], &straight[0])
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let b = std::fs::read(&p).unwrap();
            (p, b)
        })
        .collect();
    v.sort();
    v
}

fn resume_errors(kind: Kind, dir: &Path) -> Vec<String> {
    let dir = dir.to_path_buf();
    on_ranks(2, move |_, comm| {
        let m = build(kind, 0);
        Zero1::resume(comm, m.params().vars(), AdamWConfig::default(), &dir)
            .err()
            .map(|e| e.to_string())
            .expect("resumed from a bad checkpoint")
    })
}

#[test]
fn a_corrupt_shard_fails_every_rank_and_changes_nothing() {
    let dir = tmp("corrupt");
    run(Kind::Toy, 2, 0, 2, None, Some(&dir));
    std::fs::write(
        dir.join("shard-1-of-2.safetensors"),
        b"not a safetensors file",
    )
    .unwrap();
    let before = snapshot(&dir);
    let errs = resume_errors(Kind::Toy, &dir);
    assert!(
        errs.iter().all(|e| e.contains("shard-1-of-2.safetensors")),
        "{errs:?}"
    );
    assert_eq!(snapshot(&dir), before, "resume wrote into the checkpoint");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_checkpoint_of_another_model_is_refused() {
    let dir = tmp("other");
    run(Kind::Toy, 2, 0, 1, None, Some(&dir));
    let before = snapshot(&dir);
    let errs = resume_errors(Kind::Lm, &dir);
    assert!(
        errs.iter().all(|e| e.contains("from another model")),
        "{errs:?}"
    );
    assert_eq!(snapshot(&dir), before);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A 2-rank checkpoint of a 10-element model at step 3 whose shards hold `runs[r]`.
fn write_shards(dir: &Path, runs: [Vec<(usize, usize)>; 2]) {
    let (dir, runs) = (dir.to_path_buf(), std::sync::Arc::new(runs));
    let sig = checkpoint::Signature::of(&[vec![2, 3], vec![4]]);
    on_ranks(2, move |r, comm| {
        let n: usize = runs[r].iter().map(|x| x.1).sum();
        let m: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let m = checkpoint::Moments::from_vecs(runs[r].clone(), m.clone(), m).unwrap();
        let t = checkpoint::shard_entries(2, r, 3, sig, m).unwrap();
        let name = checkpoint::shard_name(r, 2);
        ::checkpoint::save(comm.as_ref(), &candle_core::Device::Cpu, &dir, 3, |f| {
            f.put_entries(&name, t)
        })
        .unwrap();
    });
}

#[test]
fn shards_listing_runs_must_hold_every_element_exactly_once() {
    use zero1::checkpoint::{read_optimizer, Signature};
    let sig = Signature::of(&[vec![2, 3], vec![4]]); // 10 elements
    let dir = tmp("runs");
    let open = |dir: &Path| ::checkpoint::Checkpoint::open(dir).unwrap();
    let read = |dir: &Path| read_optimizer(&open(dir), sig, &[(0, 10)]);
    // Rank 1's runs come first in the flat order; together they cover 0..10 once.
    write_shards(&dir, [vec![(6, 4)], vec![(0, 2), (2, 4)]]);
    let c = read(&dir).unwrap();
    assert_eq!(c.step, 3);
    let all = c.moments(0, 10).unwrap();
    assert_eq!(all.0, [0., 1., 2., 3., 4., 5., 0., 1., 2., 3.]);
    // A rank reads only the runs it asks for, in any order, across shards and runs.
    let part = read_optimizer(&open(&dir), sig, &[(8, 2), (1, 6)]).unwrap();
    assert_eq!(part.moments(1, 6).unwrap().1, [1., 2., 3., 4., 5., 0.]);
    assert_eq!(part.moments(8, 2).unwrap().0, [2., 3.]);
    assert_eq!(part.moments(3, 2).unwrap().0, [3., 4.]);
    assert_eq!(part.moments(5, 2).unwrap().0, [5., 0.]);
    for (s, l) in [(7, 2), (0, 2), (6, 3)] {
        let e = part.moments(s, l).err().unwrap().to_string();
        assert!(
            e.contains(&format!("elements {s}..{} were not read", s + l)),
            "{e}"
        );
    }
    for bad in [[(0, 3), (2, 2)], [(9, 2), (0, 1)]] {
        let e = read_optimizer(&open(&dir), sig, &bad)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("overlap or pass the model's 10 elements"), "{e}");
    }
    // Element 5 twice; element 9 in none: seen by a rank that reads neither.
    let one = |dir: &Path| read_optimizer(&open(dir), sig, &[(0, 1)]);
    write_shards(&dir, [vec![(5, 5)], vec![(0, 6)]]);
    for e in [read(&dir), one(&dir)] {
        let e = e.err().unwrap().to_string();
        assert!(e.contains("element 5 is in two shards"), "{e}");
    }
    write_shards(&dir, [vec![(6, 3)], vec![(0, 6)]]);
    for e in [read(&dir), one(&dir)] {
        let e = e.err().unwrap().to_string();
        assert!(e.contains("no shard holds the moments of element 9"), "{e}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn parameters_are_checked_holding_none_then_set_one_at_a_time() {
    use zero1::checkpoint::{check_params, shapes, Params, PARAMS};
    let dir = tmp("params");
    run(Kind::Lm, 2, 0, 2, None, Some(&dir));
    let m = build(Kind::Lm, 5);
    let vars = m.params().vars().to_vec();
    let ck = ::checkpoint::Checkpoint::open(&dir).unwrap();
    check_params(&ck, &shapes(&vars)).unwrap();
    let toy = build(Kind::Toy, 0);
    let e = check_params(&ck, &shapes(toy.params().vars()))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(PARAMS) && e.contains("from another model"),
        "{e}"
    );
    Params::Verified(ck.clone()).set(&vars).unwrap();
    let whole = ck.load(PARAMS).unwrap();
    let flat = |t: &candle_core::Tensor| -> Vec<f32> {
        let t = t
            .flatten_all()
            .unwrap()
            .to_dtype(candle_core::DType::F32)
            .unwrap();
        t.to_vec1().unwrap()
    };
    for (i, v) in vars.iter().enumerate() {
        assert_eq!(
            flat(v.as_tensor()),
            flat(&whole[&format!("p.{i}")]),
            "p.{i}"
        );
    }
    // A file changed after its check fails the set (at its end), naming the file.
    let path = dir.join(PARAMS);
    let mut b = std::fs::read(&path).unwrap();
    let at = b.len() - 3;
    b[at] ^= 0x10;
    std::fs::write(&path, &b).unwrap();
    let e = Params::Verified(ck).set(&vars).unwrap_err().to_string();
    assert!(e.contains(PARAMS) && e.contains("checksum mismatch"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

//! Issue 22, item 5: a checkpoint's files are tied to one step by its manifest. Resume
//! refuses, on every rank, naming the file and writing nothing: parameters or a shard
//! from another step, a consolidated optimizer file the manifest does not list, flipped
//! bytes in a shard's data, a missing manifest, a truncated file.

// The shared fixtures: models, batches, reference training, one closure per rank.
mod common;

use common::*;
use ddp::shard_batch;
use model::AdamWConfig;
use std::path::{Path, PathBuf};
use zero1::Zero1;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("zero1-mixed-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Trains the toy model `steps` steps on 2 ranks and saves into `dir`.
fn save_after(steps: u64, dir: &Path) {
    let dir = dir.to_path_buf();
    on_ranks(2, move |rank, comm| {
        let m = build(Kind::Toy, 0);
        let mut z = Zero1::new(comm, m.params().vars(), AdamWConfig::default()).unwrap();
        for s in 0..steps {
            let b = shard_batch(&global_batch(Kind::Toy, s), rank, 2).unwrap();
            let (_, g) = model::forward_backward(m.as_ref(), &b, |_, _| Ok(())).unwrap();
            z.step(&g).unwrap();
        }
        z.save(&dir).unwrap();
    });
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            (p.clone(), std::fs::read(&p).unwrap())
        })
        .collect();
    v.sort();
    v
}

/// Resumes `dir` on 2 ranks: every rank must fail naming `file` and saying `what`, and
/// the directory must be unchanged.
fn refused(dir: &Path, file: &str, what: &str) {
    let before = snapshot(dir);
    let d = dir.to_path_buf();
    let errs = on_ranks(2, move |_, comm| {
        let m = build(Kind::Toy, 0);
        Zero1::resume(comm, m.params().vars(), AdamWConfig::default(), &d)
            .err()
            .map(|e| e.to_string())
            .expect("resumed from a mixed or corrupted checkpoint")
    });
    for e in &errs {
        assert!(
            e.contains(file) && e.contains(what),
            "want {file}: {what}, got {e}"
        );
    }
    assert_eq!(snapshot(dir), before, "resume wrote into the checkpoint");
}

/// A copy of a step-3 checkpoint in `case`, beside step-5 files from `at5` (and, in
/// `at5-cons`, the step-5 checkpoint consolidated); `mix` changes the copy.
fn case(name: &str, mix: impl FnOnce(&Path, &Path), file: &str, what: &str) {
    let (case, at5, cons) = (
        tmp(name),
        tmp(&format!("{name}-5")),
        tmp(&format!("{name}-c")),
    );
    save_after(3, &case);
    save_after(5, &at5);
    copy_dir(&at5, &cons);
    let shapes: Vec<Vec<usize>> = build(Kind::Toy, 0)
        .params()
        .vars()
        .iter()
        .map(|v| v.dims().to_vec())
        .collect();
    zero1::checkpoint::consolidate(&cons, &shapes).unwrap();
    std::fs::rename(
        cons.join("optimizer.safetensors"),
        at5.join("optimizer.safetensors"),
    )
    .unwrap();
    mix(&case, &at5);
    refused(&case, file, what);
    for d in [&case, &at5, &cons] {
        std::fs::remove_dir_all(d).unwrap();
    }
}

fn copy(from: &Path, to: &Path, name: &str) {
    std::fs::copy(from.join(name), to.join(name)).unwrap();
}

#[test]
fn params_from_another_step_are_refused() {
    let f = "params.safetensors";
    case("params", |c, at5| copy(at5, c, f), f, "from step 5");
}

#[test]
fn a_shard_from_another_step_is_refused() {
    let f = "shard-1-of-2.safetensors";
    case("shard", |c, at5| copy(at5, c, f), f, "from step 5");
}

#[test]
fn a_consolidated_file_the_manifest_does_not_list_is_refused() {
    // It used to win over the shards.
    let f = "optimizer.safetensors";
    case("stale", |c, at5| copy(at5, c, f), f, "not in manifest.json");
}

#[test]
fn flipped_bytes_in_a_shards_data_are_refused() {
    let f = "shard-0-of-2.safetensors";
    let flip = |c: &Path, _: &Path| {
        // Its last bytes are moments (data, not header).
        let mut b = std::fs::read(c.join(f)).unwrap();
        let n = b.len();
        for x in &mut b[n - 8..n - 4] {
            *x ^= 0xff;
        }
        std::fs::write(c.join(f), &b).unwrap();
    };
    case("flip", flip, f, "checksum mismatch");
}

#[test]
fn a_truncated_file_is_refused() {
    let f = "params.safetensors";
    let cut = |c: &Path, _: &Path| {
        let b = std::fs::read(c.join(f)).unwrap();
        std::fs::write(c.join(f), &b[..b.len() / 2]).unwrap();
    };
    case("cut", cut, f, "bytes, manifest.json says");
}

#[test]
fn a_checkpoint_without_its_manifest_is_refused() {
    let f = "manifest.json";
    let rm = |c: &Path, _: &Path| std::fs::remove_file(c.join(f)).unwrap();
    case("nomanifest", rm, f, "missing");
}

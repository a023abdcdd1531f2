//! The checkpoint crate on the CPU backend: a save on 2 ranks reads back bit for bit; a
//! failed rank, a stray file, corruption, truncation and a missing manifest are refused,
//! naming the file or the rank.

use candle_core::{Device, Tensor};
use checkpoint::{save, Checkpoint, CheckpointError, Files};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::time::Duration;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ckpt-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// `f(rank, comm)` on `world` CPU ranks; fails the test after 20 s instead of hanging.
fn on_ranks<T: Send + 'static>(
    world: usize,
    f: impl Fn(usize, Arc<dyn comm::Communicator>) -> T + Send + Sync + 'static,
) -> Vec<T> {
    let f = Arc::new(f);
    let (tx, rx) = mpsc::channel();
    for (r, c) in comm::cpu_group(world, comm::CommOptions::default())
        .unwrap()
        .into_iter()
        .enumerate()
    {
        let (f, tx) = (f.clone(), tx.clone());
        std::thread::spawn(move || tx.send((r, f(r, Arc::new(c)))));
    }
    let mut out: Vec<_> = (0..world)
        .map(|_| {
            rx.recv_timeout(Duration::from_secs(20))
                .expect("a rank hung")
        })
        .collect();
    out.sort_by_key(|x| x.0);
    out.into_iter().map(|x| x.1).collect()
}

fn tensors(rank: usize, step: u64) -> HashMap<String, Tensor> {
    let v: Vec<f32> = (0..64)
        .map(|i| (i + 100 * rank) as f32 + step as f32 / 8.0)
        .collect();
    HashMap::from([(
        "x".to_string(),
        Tensor::from_vec(v, (8, 8), &Device::Cpu).unwrap(),
    )])
}

fn shard(rank: usize) -> String {
    format!("shard-{rank}.safetensors")
}

/// Every rank writes `shard-{rank}`, rank 0 also `params`; returns each rank's result.
fn save_all(
    dir: &Path,
    world: usize,
    step: u64,
    fail_on: Option<usize>,
) -> Vec<Result<(), String>> {
    let dir = dir.to_path_buf();
    on_ranks(world, move |rank, comm| {
        save(comm.as_ref(), &Device::Cpu, &dir, step, |f: &mut Files| {
            f.put(&shard(rank), &tensors(rank, step))?;
            if rank == 0 {
                f.put("params.safetensors", &tensors(9, step))?;
            }
            if fail_on == Some(rank) {
                return Err(CheckpointError::File {
                    path: dir.join("x"),
                    msg: "disk full".into(),
                });
            }
            Ok(())
        })
        .map(|_| ())
        .map_err(|e| e.to_string())
    })
}

fn x(t: &HashMap<String, Tensor>) -> Vec<f32> {
    t["x"].flatten_all().unwrap().to_vec1().unwrap()
}

#[test]
fn a_save_reads_back_bit_for_bit_with_its_manifest() {
    let dir = tmp("roundtrip");
    assert!(save_all(&dir, 2, 7, None).iter().all(|r| r.is_ok()));
    let ck = Checkpoint::open(&dir).unwrap();
    assert_eq!((ck.step(), ck.world_size()), (7, 2));
    let names: Vec<_> = ck
        .manifest()
        .files
        .iter()
        .map(|f| (f.name.as_str(), f.rank))
        .collect();
    assert_eq!(
        names,
        [
            ("params.safetensors", 0),
            ("shard-0.safetensors", 0),
            ("shard-1.safetensors", 1)
        ]
    );
    for r in 0..2 {
        assert_eq!(x(&ck.load(&shard(r)).unwrap()), x(&tensors(r, 7)));
    }
    ck.verify().unwrap();
    // No temporary file is left.
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 4, "{left:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_failed_rank_fails_every_rank_and_publishes_nothing() {
    let dir = tmp("failed");
    let res = save_all(&dir, 2, 1, Some(1));
    assert!(
        res[1].as_ref().unwrap_err().contains("disk full"),
        "{res:?}"
    );
    let e0 = res[0].as_ref().unwrap_err();
    assert!(
        e0.contains("writing failed on rank 1") && e0.contains("disk full"),
        "{e0}"
    );
    assert!(
        std::fs::read_dir(&dir).unwrap().next().is_none(),
        "files left behind"
    );
    // Over a complete checkpoint: its manifest is removed before anything is written, so
    // the failed save leaves no manifest beside (possibly) new files.
    assert!(save_all(&dir, 2, 1, None).iter().all(|r| r.is_ok()));
    assert!(save_all(&dir, 2, 2, Some(0)).iter().all(|r| r.is_err()));
    let e = Checkpoint::open(&dir).unwrap_err().to_string();
    assert!(e.contains("manifest.json: missing"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn saving_over_a_checkpoint_replaces_it_and_refuses_strays() {
    let dir = tmp("over");
    assert!(save_all(&dir, 4, 1, None).iter().all(|r| r.is_ok()));
    // On 2 ranks: shards 2 and 3 belonged to the old checkpoint and go.
    assert!(save_all(&dir, 2, 2, None).iter().all(|r| r.is_ok()));
    let ck = Checkpoint::open(&dir).unwrap();
    assert_eq!((ck.step(), ck.manifest().files.len()), (2, 3));
    assert!(!dir.join(shard(3)).exists());
    // A file no checkpoint listed is never deleted: the save fails naming it.
    std::fs::write(dir.join("mine.safetensors"), b"user data").unwrap();
    let res = save_all(&dir, 2, 3, None);
    assert!(
        res.iter()
            .all(|r| r.as_ref().is_err_and(|e| e.contains("mine.safetensors"))),
        "{res:?}"
    );
    assert_eq!(
        std::fs::read(dir.join("mine.safetensors")).unwrap(),
        b"user data"
    );
    assert!(Checkpoint::open(&dir)
        .unwrap_err()
        .to_string()
        .contains("manifest.json: missing"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn identical_saves_write_identical_bytes() {
    // The header's metadata came in a HashMap's order: identical saves differed byte for
    // byte (and in their CRCs). Six saves, so that one order matching by chance is rare.
    let dirs: Vec<PathBuf> = (0..6).map(|k| tmp(&format!("same-{k}"))).collect();
    for d in &dirs {
        assert!(save_all(d, 2, 5, None).iter().all(|r| r.is_ok()));
    }
    for name in [
        "params.safetensors",
        "shard-0.safetensors",
        "shard-1.safetensors",
        "manifest.json",
    ] {
        let first = std::fs::read(dirs[0].join(name)).unwrap();
        for d in &dirs[1..] {
            assert!(
                std::fs::read(d.join(name)).unwrap() == first,
                "{name} differs"
            );
        }
    }
    for d in dirs {
        Checkpoint::open(&d).unwrap().verify().unwrap();
        std::fs::remove_dir_all(&d).unwrap();
    }
}

#[test]
fn a_save_removes_temporary_files_an_earlier_process_left() {
    let dir = tmp("stale");
    std::fs::create_dir_all(&dir).unwrap();
    // A process killed mid-save (pid 999999999 is none of ours) left its temporary files;
    // another rank's of this process, and a user's dot-file, are not this save's to remove.
    let stale = [
        ".shard-1.safetensors.tmp-1-999999999",
        ".manifest.json.tmp-0-999999999",
    ];
    for f in stale {
        std::fs::write(dir.join(f), vec![0u8; 4096]).unwrap();
    }
    std::fs::write(dir.join(".notes.tmp-x"), b"mine").unwrap();
    assert!(save_all(&dir, 2, 3, None).iter().all(|r| r.is_ok()));
    for f in stale {
        assert!(!dir.join(f).exists(), "{f} survived the save");
    }
    assert!(dir.join(".notes.tmp-x").exists());
    Checkpoint::open(&dir).unwrap().verify().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

fn open_err(dir: &Path) -> String {
    match Checkpoint::open(dir) {
        Err(e) => e.to_string(),
        Ok(ck) => ck.verify().unwrap_err().to_string(),
    }
}

#[test]
fn corrupt_truncated_stale_and_incomplete_checkpoints_are_refused_naming_the_file() {
    let (dir, other) = (tmp("bad"), tmp("bad-other"));
    save_all(&dir, 2, 3, None);
    save_all(&other, 2, 5, None);
    let s1 = dir.join(shard(1));
    let good = std::fs::read(&s1).unwrap();
    // One flipped bit in the data (the last byte is tensor data).
    let mut b = good.clone();
    *b.last_mut().unwrap() ^= 0x40;
    std::fs::write(&s1, &b).unwrap();
    let e = open_err(&dir);
    assert!(
        e.contains("shard-1.safetensors") && e.contains("checksum mismatch"),
        "{e}"
    );
    // Truncated.
    std::fs::write(&s1, &good[..good.len() - 4]).unwrap();
    let e = open_err(&dir);
    assert!(
        e.contains("shard-1.safetensors") && e.contains("bytes, manifest.json says"),
        "{e}"
    );
    // The same file of another step (same size).
    std::fs::copy(other.join(shard(1)), &s1).unwrap();
    let e = open_err(&dir);
    assert!(
        e.contains("shard-1.safetensors") && e.contains("from step 5"),
        "{e}"
    );
    std::fs::write(&s1, &good).unwrap();
    assert_eq!(open_err_ok(&dir), "");
    // A file the manifest does not list.
    std::fs::copy(
        other.join("params.safetensors"),
        dir.join("optimizer.safetensors"),
    )
    .unwrap();
    let e = open_err(&dir);
    assert!(
        e.contains("optimizer.safetensors") && e.contains("not in manifest.json"),
        "{e}"
    );
    std::fs::remove_file(dir.join("optimizer.safetensors")).unwrap();
    // A missing file, then a missing manifest.
    std::fs::remove_file(&s1).unwrap();
    let e = open_err(&dir);
    assert!(
        e.contains("shard-1.safetensors") && e.contains("missing"),
        "{e}"
    );
    std::fs::remove_file(dir.join("manifest.json")).unwrap();
    let e = open_err(&dir);
    assert!(e.contains("manifest.json") && e.contains("missing"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&other).unwrap();
}

fn open_err_ok(dir: &Path) -> String {
    Checkpoint::open(dir)
        .and_then(|c| c.verify())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default()
}

#[test]
fn replace_swaps_files_under_a_new_manifest() {
    let dir = tmp("replace");
    save_all(&dir, 2, 4, None);
    let ck = Checkpoint::open(&dir).unwrap();
    let ck = ck
        .replace(
            &[("whole.safetensors", tensors(5, 4))],
            &["shard-0.safetensors", "shard-1.safetensors"],
        )
        .unwrap();
    let names: Vec<_> = ck.manifest().files.iter().map(|f| f.name.clone()).collect();
    assert_eq!(names, ["params.safetensors", "whole.safetensors"]);
    let again = Checkpoint::open(&dir).unwrap();
    again.verify().unwrap();
    assert_eq!(
        x(&again.load("whole.safetensors").unwrap()),
        x(&tensors(5, 4))
    );
    assert!(!dir.join(shard(0)).exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

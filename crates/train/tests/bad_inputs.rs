//! Bad inputs give an error naming the file (never a panic or a hang): a data directory
//! with a damaged or foreign part (`Dataset::open`), a context longer than the data (the
//! trainer), a text that cannot be prepared (`data::prepare`), and the same through the
//! `train` binary (exit status 2, `train: error: …` naming the file on stderr), and flags
//! that would start more rank threads or a larger batch than the host can hold.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use train::data::{prepare, Dataset, Source};
use train::launch::{run, Backend};
use train::trainer::run_rank;

const TRAIN: &str = env!("CARGO_BIN_EXE_train");
const FILES: [&str; 4] = ["meta.json", "tokenizer.json", "train.bin", "val.bin"];

/// A copy of the shared data directory at `to`.
fn copy_data(to: &Path) -> PathBuf {
    std::fs::create_dir_all(to).unwrap();
    for f in FILES {
        std::fs::copy(data().join(f), to.join(f)).unwrap();
    }
    to.to_path_buf()
}

/// The error of `r` with its causes, failing the test if it is Ok.
fn err<T>(r: anyhow::Result<T>, what: &str) -> String {
    match r {
        Ok(_) => panic!("{what}: accepted"),
        Err(e) => format!("{e:#}"),
    }
}

#[test]
fn a_damaged_or_foreign_part_of_a_data_directory_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    // Another data set with the same vocabulary size: its parts fit the checks on their
    // own, not this directory.
    let other = tmp.path().join("other");
    let src = Source::Stories {
        seed: 6,
        bytes: 100_000,
    };
    prepare(&other, src, VOCAB).unwrap();
    type Damage = Box<dyn Fn(&Path)>;
    let write = |f: &'static str, b: Vec<u8>| -> Damage {
        Box::new(move |d| std::fs::write(d.join(f), &b).unwrap())
    };
    let from_other = |f: &'static str| -> Damage {
        let o = other.clone();
        Box::new(move |d| {
            std::fs::copy(o.join(f), d.join(f)).unwrap();
        })
    };
    let mut id300 = std::fs::read(data().join("train.bin")).unwrap();
    id300[10..12].copy_from_slice(&300u16.to_le_bytes());
    let mut odd = std::fs::read(data().join("val.bin")).unwrap();
    odd.push(0);
    let meta = std::fs::read_to_string(data().join("meta.json")).unwrap();
    let cases: Vec<(&str, Damage, &str, &str)> = vec![
        (
            "empty train.bin",
            write("train.bin", vec![]),
            "train.bin",
            "is empty",
        ),
        (
            "odd-sized val.bin",
            write("val.bin", odd),
            "val.bin",
            "an odd number",
        ),
        (
            "an id = vocab",
            write("train.bin", id300),
            "train.bin",
            "id 300 at token 5, out of range for the vocabulary of 300",
        ),
        (
            "another data set's train.bin",
            from_other("train.bin"),
            "train.bin",
            "meta.json says",
        ),
        (
            "another data set's val.bin",
            from_other("val.bin"),
            "val.bin",
            "meta.json says",
        ),
        (
            "another tokenizer",
            from_other("tokenizer.json"),
            "tokenizer.json",
            "does not match the token files",
        ),
        (
            "meta.json's vocabulary size is not the tokenizer's",
            write(
                "meta.json",
                meta.replace("\"vocab_size\": 300", "\"vocab_size\": 299")
                    .into_bytes(),
            ),
            "tokenizer.json",
            "of 299 tokens with hash",
        ),
        (
            "meta.json not JSON",
            write("meta.json", b"{\"vocab_size\": 3".to_vec()),
            "meta.json",
            "parsing",
        ),
        (
            "tokenizer.json not a tokenizer",
            write("tokenizer.json", b"[]".to_vec()),
            "tokenizer.json",
            "reading tokenizer",
        ),
    ];
    for (i, (what, damage, file, says)) in cases.iter().enumerate() {
        let d = copy_data(&tmp.path().join(format!("case-{i}")));
        damage(&d);
        let e = err(Dataset::open(&d), what);
        let path = d.join(file).display().to_string();
        assert!(e.contains(&path) && e.contains(says), "{what}: {e}");
    }
    for f in FILES {
        let d = copy_data(&tmp.path().join(format!("without-{f}")));
        std::fs::remove_file(d.join(f)).unwrap();
        let e = err(Dataset::open(&d), f);
        assert!(
            e.contains(&d.join(f).display().to_string()),
            "{f} missing: {e}"
        );
    }
    assert!(Dataset::open(&copy_data(&tmp.path().join("intact"))).is_ok());
}

#[test]
fn a_context_longer_than_the_data_is_refused_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = Dataset::open(data()).unwrap();
    // The validation split is the shorter one: a context that fits the training split
    // but not it is refused naming val.bin, a longer one naming train.bin.
    for (context, file) in [(ds.val.len(), "val.bin"), (ds.train.len(), "train.bin")] {
        let mut c = tiny("single", 1);
        c.model.context = context;
        let o = opts(&tmp.path().join(file), 1, None);
        let e = err(
            run(Backend::Cpu, 1, |comm, dev| run_rank(&c, &o, comm, dev)),
            file,
        );
        let want = format!("token file {} has", data().join(file).display());
        assert!(
            e.contains(&want) && e.contains(&format!("not more than the context {context}")),
            "{e}"
        );
    }
}

#[test]
fn a_text_that_cannot_be_prepared_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: [(&str, Option<&[u8]>, &str); 6] = [
        ("missing.txt", None, "No such file"),
        ("empty.txt", Some(b""), "has 0 documents"),
        ("blank.txt", Some(b"\n\n  \n\n\n"), "has 0 documents"),
        (
            "one.txt",
            Some(b"Once upon a time there was one story."),
            "has 1 documents",
        ),
        (
            "latin1.txt",
            Some(b"caf\xe9 au lait\n\nthe end"),
            "is not UTF-8: invalid utf-8 sequence of 1 bytes from index 3",
        ),
        (
            "tiny.txt",
            Some(b"ab\n\ncd"),
            "too small to train a tokenizer",
        ),
    ];
    for (name, content, says) in cases {
        let p = tmp.path().join(name);
        if let Some(b) = content {
            std::fs::write(&p, b).unwrap();
        }
        let e = err(
            prepare(
                &tmp.path().join(format!("data-{name}")),
                Source::Text(&p),
                300,
            ),
            name,
        );
        assert!(
            e.contains(&p.display().to_string()) && e.contains(says),
            "{name}: {e}"
        );
    }
    // The embedded stories too small to split.
    let e = err(
        prepare(
            &tmp.path().join("few"),
            Source::Stories { seed: 0, bytes: 10 },
            300,
        ),
        "10 bytes",
    );
    assert!(
        e.contains("10 bytes of stories make only 1 document(s)"),
        "{e}"
    );
    // Small but enough: two documents with a repeated pair.
    let p = tmp.path().join("small.txt");
    std::fs::write(&p, "the cat sat\n\nthe cat sat on the mat").unwrap();
    let m = prepare(&tmp.path().join("small"), Source::Text(&p), 300).unwrap();
    assert!(
        m.vocab_size > 257 && m.train_tokens > 0 && m.val_tokens > 0,
        "{m:?}"
    );
}

/// Runs the `train` binary; (exit code, stderr). Fails the test if it takes over 60 s.
fn train_bin(args: &[&str]) -> (Option<i32>, String) {
    let mut c = Command::new(TRAIN)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while c.try_wait().unwrap().is_none() {
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = c.kill();
            panic!("train {args:?} did not exit within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = c.wait_with_output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn the_binary_exits_with_an_error_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let s = |p: &Path| p.display().to_string();
    let out = s(&tmp.path().join("run"));
    let empty = copy_data(&tmp.path().join("empty"));
    std::fs::write(empty.join("train.bin"), b"").unwrap();
    let no_meta = copy_data(&tmp.path().join("no-meta"));
    std::fs::remove_file(no_meta.join("meta.json")).unwrap();
    let text = tmp.path().join("absent.txt");
    let run_args = [
        "--out",
        &out,
        "--model",
        "nano",
        "--steps",
        "1",
        "--no-progress",
    ];
    let cases: Vec<(Vec<String>, String, &str)> = vec![
        (
            vec![
                "prepare".into(),
                "--text".into(),
                s(&text),
                "--data".into(),
                s(&tmp.path().join("d")),
            ],
            s(&text),
            "reading text file",
        ),
        (
            [&["run", "--data", &s(&empty)][..], &run_args]
                .concat()
                .iter()
                .map(|a| a.to_string())
                .collect(),
            s(&empty.join("train.bin")),
            "is empty",
        ),
        (
            [&["run", "--data", &s(&no_meta)][..], &run_args]
                .concat()
                .iter()
                .map(|a| a.to_string())
                .collect(),
            s(&no_meta.join("meta.json")),
            "run `train prepare` first?",
        ),
        (
            [
                &[
                    "run",
                    "--data",
                    &s(data()),
                    "--context",
                    "1000000",
                    "--world",
                    "2",
                ][..],
                &run_args,
            ]
            .concat()
            .iter()
            .map(|a| a.to_string())
            .collect(),
            s(&data().join("train.bin")),
            "not more than the context 1000000",
        ),
    ];
    for (args, file, says) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, err) = train_bin(&args);
        // The user's failure: the code a restarting launcher does not retry.
        assert_eq!(code, Some(2), "train {args:?}: {err}");
        // The line naming the device the run took may come first; then only the error.
        let err: String = err
            .lines()
            .filter(|l| !l.starts_with("train: device: "))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            err.starts_with("train: error: ") && err.contains(&file) && err.contains(says),
            "train {args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "train {args:?}: {err}");
    }
}

/// Flags that start too many rank threads or a batch the host cannot hold are refused by
/// name with the user's exit code, before a thread or a batch is made (50,000 thread ranks
/// aborted in their stacks' set-up; a batch of 10^11 sequences aborted in its allocation).
#[test]
fn a_world_or_batch_the_host_cannot_hold_is_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run").display().to_string();
    let d = data().display().to_string();
    let run = ["run", "--data", &d, "--out", &out, "--model", "nano"];
    let more = ["--steps", "1", "--no-progress", "--backend", "cpu"];
    for (flags, says) in [
        (&["--world", "0"][..], "--world 0"),
        (
            &["--world", "5000", "--global-batch", "5000"],
            "--world 5000: at most",
        ),
        (
            &["--world", "3"],
            "--global-batch 16 does not split into 3 ranks",
        ),
        (
            &["--global-batch", "99999999999"],
            "(--global-batch 99999999999): the run needs at least",
        ),
    ] {
        let args = [&run[..], &more, flags].concat();
        let (code, err) = train_bin(&args);
        assert_eq!(code, Some(2), "train {args:?}: {err}");
        assert!(
            err.contains(says) && !err.contains("panicked"),
            "train {args:?}: {err}"
        );
        assert!(
            !tmp.path().join("run").exists(),
            "train {args:?} left its --out"
        );
    }
    // `train sample`'s bad flag is the user's too (it exited 1).
    let (code, err) = train_bin(&[
        "sample",
        "--data",
        &d,
        "--out",
        &out,
        "--temperature",
        "nan",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--temperature NaN"), "{err}");
}

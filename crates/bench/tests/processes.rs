//! Data parallelism on the multi-process CPU backend with real processes: DDP (`bench
//! ddp-check`) and ZeRO-1 (`bench zero1-check`) under the launcher equal
//! single-process training, and the failure paths a user meets: a rank killed
//! mid-training, a rank that never arrives, ranks that disagree on the world size or the
//! model. Every test is bounded in time.

use comm::launch::{run, LaunchSpec};
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The tests run one at a time: a port picked by binding port 0 and closing it can be
/// handed to a test running beside it (seen in CI with the store tests).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

const BENCH: &str = env!("CARGO_BIN_EXE_bench");

fn port() -> u16 {
    comm::launch::free_port().unwrap()
}

#[test]
fn ddp_check_as_2_and_4_processes_equals_single_process_training() {
    let _one = one_at_a_time();
    for n in [2, 4] {
        let t0 = Instant::now();
        let args = [
            "ddp-check",
            "--backend",
            "cpu",
            "--model",
            "toy",
            "--steps",
            "4",
        ];
        let mut spec = LaunchSpec::local(n, BENCH, args.map(String::from).to_vec());
        spec.env.push(("COMM_TIMEOUT_S".into(), "20".into()));
        run(&spec).unwrap_or_else(|e| panic!("{n} processes: {e}"));
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{n} processes took {:?}",
            t0.elapsed()
        );
    }
}

/// ZeRO-1 (`Zero1Overlap`, gather-ahead) as real processes: `bench zero1-check` under the
/// launcher trains the tiny LM on every rank, and passes only if every rank holds rank 0's
/// weights, they equal single-process AdamW on the whole batch (atol 1e-5 + rtol 1.3e-6),
/// and a run resumed from its sharded checkpoint with other buckets continues the same
/// trajectory.
#[test]
fn zero1_as_2_and_4_processes_equals_single_process_training() {
    let _one = one_at_a_time();
    for n in [2, 4] {
        let t0 = Instant::now();
        let dir = std::env::temp_dir().join(format!("processes-zero1-{n}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let args = [
            "zero1-check",
            "--backend",
            "cpu",
            "--steps",
            "4",
            "--save-at",
            "2",
            "--global-batch",
            "4",
            "--dir",
            dir.to_str().unwrap(),
        ];
        let exe = env!("CARGO_BIN_EXE_bench");
        let mut spec = LaunchSpec::local(n, exe, args.map(String::from).to_vec());
        spec.env.push(("COMM_TIMEOUT_S".into(), "20".into()));
        let r = run(&spec);
        let _ = std::fs::remove_dir_all(&dir);
        r.unwrap_or_else(|e| panic!("{n} processes: {e}"));
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{n} processes took {:?}",
            t0.elapsed()
        );
    }
}

/// Starts rank `rank` of `world` directly (no launcher), stdout and stderr piped.
fn rank(rank: usize, world: usize, port: u16, timeout_s: &str, args: &[&str]) -> Child {
    Command::new(BENCH)
        .args(["ddp-check", "--backend", "cpu"])
        .args(args)
        .env("RANK", rank.to_string())
        .env("WORLD_SIZE", world.to_string())
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", port.to_string())
        .env("COMM_TIMEOUT_S", timeout_s)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for `c` within `limit`; (success, stderr). Kills it and fails the test if late.
fn finish(mut c: Child, limit: Duration, who: &str) -> (bool, String) {
    let t0 = Instant::now();
    loop {
        if let Some(st) = c.try_wait().unwrap() {
            let mut err = String::new();
            c.stderr.take().unwrap().read_to_string(&mut err).unwrap();
            return (st.success(), err);
        }
        if t0.elapsed() > limit {
            let _ = c.kill();
            panic!("{who} did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_rank_killed_mid_training_fails_every_other_rank_naming_it() {
    let _one = one_at_a_time();
    let p = port();
    let long = [
        "--model",
        "toy",
        "--steps",
        "1000000",
        "--global-batch",
        "12",
    ];
    let mut ranks: Vec<Child> = (0..3).map(|r| rank(r, 3, p, "20", &long)).collect();
    // Rank 0 prints a line per step: wait for training to be under way.
    let out = ranks[0].stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if line.starts_with("step 3:") {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("training never reached step 3");
    let t0 = Instant::now();
    ranks[1].kill().unwrap(); // SIGKILL
    let _ = ranks[1].wait();
    // Rank 2 reads from rank 1 and names it. Rank 0 reads from rank 2: it names rank 1
    // when rank 2's ABORT reaches it, but an ABORT can only go out between frames, so
    // when rank 2 failed in the middle of a frame to rank 0, rank 0 names rank 2, which
    // exited on rank 1's failure. Either way rank 0's error names a rank that exited,
    // and rank 2's names rank 1, so the cause is on record.
    for (r, c) in ranks.into_iter().enumerate().filter(|(r, _)| *r != 1) {
        let (ok, err) = finish(c, Duration::from_secs(25), &format!("rank {r}"));
        assert!(!ok, "rank {r} exited 0");
        let names = |k: usize| err.contains(&format!("rank {k} closed its connection"));
        match r {
            2 => assert!(names(1), "rank 2: {err}"),
            _ => assert!(names(1) || names(2), "rank {r}: {err}"),
        }
    }
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "took {:?}",
        t0.elapsed()
    );
}

#[test]
fn the_launcher_reports_a_killed_rank() {
    let _one = one_at_a_time();
    let script = format!(
        "if [ \"$RANK\" = 1 ]; then (sleep 1; kill -9 $$) & fi; exec {BENCH} ddp-check --backend cpu --model toy --steps 1000000"
    );
    let mut spec = LaunchSpec::local(2, "sh", vec!["-c".into(), script]);
    spec.env.push(("COMM_TIMEOUT_S".into(), "20".into()));
    let t0 = Instant::now();
    let err = run(&spec).unwrap_err().to_string();
    assert!(
        err.contains("rank 1 failed") && err.contains("SIGKILL"),
        "{err}"
    );
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "took {:?}",
        t0.elapsed()
    );
}

#[test]
fn a_rank_that_never_arrives_is_named_by_the_others() {
    let _one = one_at_a_time();
    let p = port();
    let ranks: Vec<Child> = (0..2)
        .map(|r| rank(r, 3, p, "2", &["--model", "toy"]))
        .collect();
    for (r, c) in ranks.into_iter().enumerate() {
        let (ok, err) = finish(c, Duration::from_secs(20), &format!("rank {r}"));
        assert!(!ok && err.contains("[2]"), "rank {r}: {err}");
    }
}

#[test]
fn a_different_world_size_or_model_fails_every_rank() {
    let _one = one_at_a_time();
    let p = port();
    let a = rank(0, 2, p, "10", &["--model", "toy"]);
    let b = rank(1, 3, p, "10", &["--model", "toy"]);
    for (r, c) in [a, b].into_iter().enumerate() {
        let (ok, err) = finish(c, Duration::from_secs(20), &format!("rank {r}"));
        assert!(!ok && err.contains("WORLD_SIZE=3"), "rank {r}: {err}");
    }
    let p = port();
    let a = rank(0, 2, p, "10", &["--model", "toy"]);
    let b = rank(1, 2, p, "10", &["--model", "tiny"]);
    for (r, c) in [a, b].into_iter().enumerate() {
        let (ok, err) = finish(c, Duration::from_secs(20), &format!("rank {r}"));
        assert!(!ok && err.contains("error"), "rank {r}: {err}");
    }
}

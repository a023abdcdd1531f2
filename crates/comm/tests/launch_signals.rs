//! `comm-launch` as a user runs it, with real shell-script ranks: a signal to the launcher
//! stops every rank (and what the ranks started), and a killed launcher takes them along.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("comm-launch-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Starts `comm-launch` in its own process group (signals to it spare the test harness),
/// with the default disposition of the signals it forwards: a launcher that inherits them
/// ignored (a background job ignores SIGINT, `nohup` SIGHUP) keeps them ignored, as it
/// should, and these tests are about forwarding, not about how the harness was started.
fn launch(n: usize, grace_s: &str, script: &str, dir: &Path) -> Child {
    let mut c = Command::new(env!("CARGO_BIN_EXE_comm-launch"));
    c.args(["--nproc-per-node", &n.to_string(), "--grace-s", grace_s])
        .args(["--", "sh", "-c", script])
        .env("DIR", dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0);
    // SAFETY: signal(2) only, async-signal-safe, between fork and exec.
    unsafe {
        c.pre_exec(|| {
            for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                libc::signal(sig, libc::SIG_DFL);
            }
            Ok(())
        });
    }
    c.spawn().unwrap()
}

/// Bounds on waits for events (a process started, exited, gone): generous, so that a
/// loaded machine never trips them; they only turn a hang into a failure.
const START: Duration = Duration::from_secs(60);
const EXIT: Duration = Duration::from_secs(120);
const GONE: Duration = Duration::from_secs(30);

/// Waits until `n` pid files `prefix*` hold a pid; returns the pids.
fn pids(dir: &Path, prefix: &str, n: usize) -> Vec<i32> {
    let t0 = Instant::now();
    loop {
        let got: Vec<i32> = (0..n)
            .filter_map(|r| std::fs::read_to_string(dir.join(format!("{prefix}{r}"))).ok())
            .filter_map(|s| s.trim().parse().ok())
            .collect();
        if got.len() == n {
            return got;
        }
        assert!(t0.elapsed() < START, "ranks did not start within {START:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Alive: kill(pid, 0) succeeds and the process is not a zombie waiting to be reaped.
fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    if unsafe { libc::kill(pid, 0) } != 0 {
        return false;
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rsplit(')').next().unwrap_or("").trim_start();
    !(state.starts_with('Z') || state.starts_with('X') || stat.is_empty())
}

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: plain kill(2) on a child this test started.
    unsafe { libc::kill(pid as i32, sig) };
}

/// Waits for the launcher with a bound; kills it and fails if it does not exit.
fn wait_for(child: &mut Child, limit: Duration) -> (ExitStatus, String) {
    let t0 = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            let mut err = String::new();
            use std::io::Read;
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return (st, err);
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            panic!("comm-launch did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every pid is gone within `limit`; kills the survivors (no strays) and fails otherwise.
fn assert_all_gone(pids: &[i32], limit: Duration) {
    let t0 = Instant::now();
    while pids.iter().any(|&p| alive(p)) && t0.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    for &p in &left {
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
    assert!(left.is_empty(), "processes still alive: {left:?}");
}

/// Ranks that ignore SIGTERM, each with a grandchild that ignores it too.
const STUBBORN: &str =
    r#"trap "" TERM; sleep 100 & echo $! > "$DIR/gc$RANK"; echo $$ > "$DIR/rank$RANK"; wait"#;

#[test]
fn sigterm_is_forwarded_then_stubborn_ranks_are_killed_after_the_grace() {
    let dir = scratch("term");
    let mut l = launch(2, "1", STUBBORN, &dir);
    let mut all = pids(&dir, "rank", 2);
    all.extend(pids(&dir, "gc", 2));
    let t0 = Instant::now();
    signal(l.id(), libc::SIGTERM);
    let (st, err) = wait_for(&mut l, EXIT);
    assert!(
        t0.elapsed() >= Duration::from_millis(900),
        "did not wait the grace"
    );
    assert_eq!(st.code(), Some(128 + libc::SIGTERM), "{err}");
    assert!(err.contains("interrupted by SIGTERM"), "{err}");
    assert!(err.contains("killed ranks [0, 1]"), "{err}");
    assert_all_gone(&all, GONE);
}

#[test]
fn sigint_and_sighup_reach_every_rank_without_waiting_the_grace() {
    for (sig, name) in [(libc::SIGINT, "SIGINT"), (libc::SIGHUP, "SIGHUP")] {
        let dir = scratch(name);
        // A grace far past the wait's bound: ranks that were not signalled would be
        // killed only after it, and the launcher says which way they went.
        let mut l = launch(
            3,
            "600",
            r#"echo $$ > "$DIR/rank$RANK"; exec sleep 100"#,
            &dir,
        );
        let ranks = pids(&dir, "rank", 3);
        signal(l.id(), sig);
        let (st, err) = wait_for(&mut l, EXIT);
        assert_all_gone(&ranks, GONE);
        assert_eq!(st.code(), Some(128 + sig), "{name}: {err}");
        assert!(err.contains(&format!("interrupted by {name}")), "{err}");
        assert!(
            err.contains("forwarded it to every rank; all exited"),
            "{name}: the ranks did not exit on the forwarded signal: {err}"
        );
    }
}

#[test]
fn sigkill_to_the_launcher_takes_ranks_and_their_children_along() {
    let dir = scratch("kill");
    let mut l = launch(2, "10", STUBBORN, &dir);
    let mut all = pids(&dir, "rank", 2);
    all.extend(pids(&dir, "gc", 2));
    signal(l.id(), libc::SIGKILL);
    let _ = wait_for(&mut l, EXIT);
    assert_all_gone(&all, GONE);
}

#[test]
fn ranks_die_with_the_launcher_even_when_its_whole_group_is_killed() {
    // SIGKILL to the launcher's process group also kills its watchdog: the ranks then
    // go through their parent-death signal.
    let dir = scratch("killpg");
    let mut l = launch(
        2,
        "10",
        r#"trap "" TERM; echo $$ > "$DIR/rank$RANK"; exec sleep 100"#,
        &dir,
    );
    let ranks = pids(&dir, "rank", 2);
    // SAFETY: the launcher leads its own group (process_group(0) above).
    unsafe { libc::kill(-(l.id() as i32), libc::SIGKILL) };
    let _ = wait_for(&mut l, EXIT);
    assert_all_gone(&ranks, GONE);
}

#[test]
fn bad_grace_is_refused_naming_the_flag() {
    for bad in ["-1", "nan", "inf", "1e9", "soon"] {
        let out = Command::new(env!("CARGO_BIN_EXE_comm-launch"))
            .args([&format!("--grace-s={bad}"), "--", "true"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{bad}");
        assert!(err.contains("--grace-s"), "{bad}: {err}");
    }
}

#[test]
fn too_many_processes_a_node_are_refused_before_any_starts() {
    let dir = scratch("too-many");
    let mark = dir.join("started");
    for args in [
        vec!["--nproc-per-node", "100000"],
        vec![
            "--nnodes",
            "18446744073709551615",
            "--nproc-per-node",
            "2",
            "--master-port",
            "29999",
        ],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_comm-launch"))
            .args(&args)
            .args(["--", "touch", mark.to_str().unwrap()])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(
            err.contains(args[1]) && !err.contains("panicked"),
            "{args:?}: {err}"
        );
        assert!(!mark.exists(), "{args:?}: a rank started");
    }
}

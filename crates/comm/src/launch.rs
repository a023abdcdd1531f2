//! Spawning ranks on one node, torchrun-style (`comm-launch` is the command line).
//!
//! Each rank is a child process with RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
//! MASTER_ADDR and MASTER_PORT set. Its output lines are prefixed with `[rank r]`. When a
//! rank fails, the others are killed and the launch fails naming the rank and its status.
//!
//! SIGINT, SIGTERM and SIGHUP to the launcher are forwarded to every rank's process group;
//! groups still alive after [`LaunchSpec::grace`] get SIGKILL, and the launch fails naming
//! the signal (`supervise`). If the launcher itself dies, even by SIGKILL, the ranks die too
//! (`reaper`).

mod reaper;
pub mod signals;
mod supervise;

use supervise::{kill_all, supervise};

use crate::error::{CommError, Result};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Default time ranks get to exit after a forwarded signal before they are killed.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);

/// What to launch and where this node sits in the job.
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    pub nproc_per_node: usize,
    pub nnodes: usize,
    pub node_rank: usize,
    pub master_addr: String,
    /// `None` or `Some(0)`: a free local port (single node only).
    pub master_port: Option<u16>,
    pub program: String,
    pub args: Vec<String>,
    /// Extra environment for every rank.
    pub env: Vec<(String, String)>,
    /// After forwarding SIGINT/SIGTERM/SIGHUP, how long ranks get before SIGKILL.
    pub grace: Duration,
    /// How many times a failed job is started again (torchrun's `--max-restarts`; one
    /// node only). See [`run`] for what is retried.
    pub max_restarts: usize,
}

/// The exit code by which a rank says its failure is the user's (bad flags, input it
/// refuses, a checkpoint it will not resume): clap's usage code. The launcher does not
/// restart a job one of whose ranks exited with it.
pub const USER_ERROR_EXIT: i32 = 2;

impl LaunchSpec {
    pub fn local(nproc: usize, program: impl Into<String>, args: Vec<String>) -> Self {
        Self {
            nproc_per_node: nproc,
            nnodes: 1,
            node_rank: 0,
            master_addr: "127.0.0.1".into(),
            master_port: None,
            program: program.into(),
            args,
            env: Vec::new(),
            grace: DEFAULT_GRACE,
            max_restarts: 0,
        }
    }
}

fn bad(msg: String) -> CommError {
    CommError::Launch(msg)
}

/// A free TCP port on this machine (bound then released), below the kernel's ephemeral
/// range where there is room: between its release and rank 0's bind, a socket that binds
/// port 0 (the CPU backend's ring listeners, any client) cannot be handed it. Seen under
/// load: rank 0 "cannot listen on port …: Address already in use".
pub fn free_port() -> Result<u16> {
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768);
    const FIRST: u32 = 10_000;
    if low > FIRST + 1000 {
        let span = low - FIRST;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let mut x = nanos ^ (std::process::id() << 16);
        for _ in 0..64 {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let port = (FIRST + x % span) as u16;
            if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return Ok(port);
            }
        }
    }
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn pipe_lines(
    src: impl std::io::Read + Send + 'static,
    rank: usize,
    to_stderr: bool,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for line in BufReader::new(src).lines() {
            let Ok(line) = line else { break };
            if to_stderr {
                let _ = writeln!(std::io::stderr().lock(), "[rank {rank}] {line}");
            } else {
                let _ = writeln!(std::io::stdout().lock(), "[rank {rank}] {line}");
            }
        }
    })
}

/// How one start of the job ended, when it failed.
enum Failed {
    /// A rank failed; `retry`: not by the user's fault ([`USER_ERROR_EXIT`]).
    Rank { err: CommError, retry: bool },
    /// Anything else (the launcher was signalled, could not start a rank): final.
    Final(CommError),
}

/// Runs all ranks of this node to completion. Fails (after killing the others) as soon
/// as one rank fails; with [`LaunchSpec::max_restarts`] N, the job is started again, up to
/// N times, after a rank died by a signal or exited non-zero, unless one exited with
/// [`USER_ERROR_EXIT`] (the user's failure, which a restart would repeat). Each restart is
/// printed naming the rank, its status and the attempt; the ranks see the attempt in
/// `COMM_RESTART_COUNT` (and torchrun's `TORCHELASTIC_RESTART_COUNT`). A clean exit and
/// a signal to the launcher are never retried.
pub fn run(spec: &LaunchSpec) -> Result<()> {
    if spec.max_restarts > 0 && spec.nnodes > 1 {
        return Err(bad(format!(
            "--max-restarts with {} nodes: each node's launcher would restart its own ranks alone; restart the whole job from the scheduler (Slurm --requeue) instead",
            spec.nnodes
        )));
    }
    let mut attempt = 0;
    loop {
        match run_once(spec, attempt) {
            Ok(()) => return Ok(()),
            Err(Failed::Rank { err, retry: true }) if attempt < spec.max_restarts => {
                attempt += 1;
                eprintln!(
                    "comm-launch: {err}; restart {attempt} of {} (the program resumes from its newest checkpoint)",
                    spec.max_restarts
                );
            }
            Err(Failed::Rank { err, retry }) => {
                return Err(match (retry, spec.max_restarts) {
                    (_, 0) => err,
                    (false, _) => bad(format!(
                        "{err}; not restarted: a rank exited with code {USER_ERROR_EXIT}, the user's failure"
                    )),
                    (true, n) => bad(format!("{err}; no restart left ({n} made)")),
                })
            }
            Err(Failed::Final(e)) => return Err(e),
        }
    }
}

/// The most processes `comm-launch` starts on one node: 100,000 (a typo's worth) forked
/// for ten minutes before the first failure could stop them.
pub const MAX_NPROC_PER_NODE: usize = 1024;

fn run_once(spec: &LaunchSpec, attempt: usize) -> std::result::Result<(), Failed> {
    let fin = Failed::Final;
    if spec.nproc_per_node == 0 || spec.nnodes == 0 {
        return Err(fin(bad(
            "nproc-per-node and nnodes must be at least 1".into()
        )));
    }
    if spec.nproc_per_node > MAX_NPROC_PER_NODE {
        return Err(fin(bad(format!(
            "--nproc-per-node {}: at most {MAX_NPROC_PER_NODE} processes a node (one a GPU, or \
             CPU ranks)",
            spec.nproc_per_node
        ))));
    }
    if spec.nproc_per_node.checked_mul(spec.nnodes).is_none() {
        return Err(fin(bad(format!(
            "--nnodes {} × --nproc-per-node {}: too many ranks",
            spec.nnodes, spec.nproc_per_node
        ))));
    }
    if spec.node_rank >= spec.nnodes {
        return Err(fin(bad(format!(
            "node-rank {} is not below nnodes {}",
            spec.node_rank, spec.nnodes
        ))));
    }
    // One node without a port given: a new free port for every start.
    let port = match spec.master_port {
        Some(p) if p != 0 => p,
        _ if spec.nnodes == 1 => free_port().map_err(fin)?,
        Some(_) => {
            return Err(fin(bad(
                "--master-port 0 with several nodes: the nodes must agree on one port, give it explicitly".into(),
            )))
        }
        None => return Err(fin(bad("a multi-node launch needs --master-port".into()))),
    };
    // Before the first fork: a signal from now on is forwarded, not fatal.
    let _handlers = signals::install().map_err(|e| fin(e.into()))?;
    let world = spec.nproc_per_node * spec.nnodes;
    let mut children: Vec<(usize, Child)> = Vec::new();
    let mut pipes = Vec::new();
    for local in 0..spec.nproc_per_node {
        let rank = spec.node_rank * spec.nproc_per_node + local;
        let mut cmd = Command::new(&spec.program);
        cmd.args(&spec.args)
            .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("RANK", rank.to_string())
            .env("LOCAL_RANK", local.to_string())
            .env("WORLD_SIZE", world.to_string())
            .env("LOCAL_WORLD_SIZE", spec.nproc_per_node.to_string())
            .env("MASTER_ADDR", &spec.master_addr)
            .env("MASTER_PORT", port.to_string())
            .env("COMM_RESTART_COUNT", attempt.to_string())
            .env("TORCHELASTIC_RESTART_COUNT", attempt.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group, so that stopping a rank stops what it started too.
            .process_group(0);
        reaper::die_with_parent(&mut cmd);
        let spawned = cmd.spawn();
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                kill_all(&mut children);
                return Err(fin(bad(format!("cannot start {:?}: {e}", spec.program))));
            }
        };
        pipes.push(pipe_lines(child.stdout.take().expect("piped"), rank, false));
        pipes.push(pipe_lines(child.stderr.take().expect("piped"), rank, true));
        children.push((rank, child));
    }
    let ids: Vec<u32> = children.iter().map(|(_, c)| c.id()).collect();
    let watchdog = match reaper::Watchdog::start(&ids) {
        Ok(w) => w,
        Err(e) => {
            kill_all(&mut children);
            return Err(fin(bad(format!("cannot start the watchdog process: {e}"))));
        }
    };
    let outcome = supervise(&mut children, spec.grace);
    watchdog.stand_down();
    for p in pipes {
        let _ = p.join();
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, n: usize) -> Result<()> {
        run(&LaunchSpec::local(
            n,
            "sh",
            vec!["-c".into(), script.into()],
        ))
    }

    #[test]
    fn sets_rank_environment_and_succeeds() {
        sh("test \"$WORLD_SIZE\" = 3 && test \"$RANK\" = \"$LOCAL_RANK\" && test -n \"$MASTER_PORT\"", 3).unwrap();
    }

    #[test]
    fn one_failing_rank_stops_the_others() {
        let t0 = std::time::Instant::now();
        let err = sh("if [ \"$RANK\" = 1 ]; then exit 3; else sleep 30; fi", 3)
            .unwrap_err()
            .to_string();
        assert!(err.contains("rank 1 failed"), "{err}");
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "others were not stopped"
        );
    }

    #[test]
    fn master_port_zero_picks_a_free_port_on_one_node_and_is_refused_on_several() {
        let check = "test \"$MASTER_PORT\" -gt 0 && test \"$MASTER_PORT\" -lt 65536";
        let mut s = LaunchSpec::local(2, "sh", vec!["-c".into(), check.into()]);
        s.master_port = Some(0);
        run(&s).unwrap();
        s.nnodes = 2;
        let err = run(&s).unwrap_err().to_string();
        assert!(err.contains("--master-port 0"), "{err}");
    }

    #[test]
    fn max_restarts_starts_a_failed_job_again_until_it_passes_or_none_is_left() {
        let mut s = LaunchSpec::local(
            2,
            "sh",
            vec![
                "-c".into(),
                "test \"$RANK\" = 0 || test \"$COMM_RESTART_COUNT\" -ge 2 || kill -9 $$".into(),
            ],
        );
        s.max_restarts = 2;
        run(&s).unwrap(); // rank 1 killed in attempts 0 and 1, passes in 2
        s.max_restarts = 1;
        let e = run(&s).unwrap_err().to_string();
        assert!(
            e.contains("rank 1 failed (signal: 9") && e.contains("no restart left (1 made)"),
            "{e}"
        );
        s.nnodes = 2;
        s.master_port = Some(29_999);
        let e = run(&s).unwrap_err().to_string();
        assert!(e.contains("--max-restarts with 2 nodes"), "{e}");
    }

    #[test]
    fn bad_spec_is_rejected() {
        let mut s = LaunchSpec::local(2, "true", vec![]);
        s.node_rank = 1;
        // The launcher's own error, not a rank's: no "on rank 0" prefix.
        assert!(run(&s).unwrap_err().to_string().starts_with("node-rank 1"));
        assert!(run(&LaunchSpec::local(1, "/nonexistent/prog", vec![]))
            .unwrap_err()
            .to_string()
            .contains("cannot start"));
    }
}

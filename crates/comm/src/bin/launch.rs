//! `comm-launch`: start one process per GPU with the torchrun environment.
//!
//! One node:   comm-launch --nproc-per-node 2 -- ./bench allreduce
//! Two nodes:  comm-launch --nnodes 2 --node-rank $NODE --master-addr host0 --master-port 29500 \
//!               --nproc-per-node 8 -- ./train ...
//!
//! SIGINT/SIGTERM/SIGHUP are forwarded to every rank; ranks still running `--grace-s`
//! seconds later are killed, and comm-launch exits with 128 + the signal's number.
//! `--max-restarts N` starts a failed job again, up to N times (a rank killed or exiting
//! non-zero; not one exiting with 2, the user's failure).

use clap::Parser;
use comm::launch::{run, LaunchSpec};
use comm::CommError;
use std::time::Duration;

/// Longest `--grace-s` accepted (one hour).
const MAX_GRACE_S: f64 = 3600.0;

#[derive(Parser)]
#[command(about = "Launch one process per GPU (torchrun conventions); fail all if one fails")]
struct Args {
    /// Processes (GPUs) on this node.
    #[arg(long, alias = "gpus", default_value_t = 1)]
    nproc_per_node: usize,
    /// Nodes in the job, each running its own comm-launch with the same flags but
    /// --node-rank.
    #[arg(long, default_value_t = 1)]
    nnodes: usize,
    /// This node's index, 0 to nnodes - 1; its ranks are node-rank × nproc-per-node on.
    #[arg(long, default_value_t = 0)]
    node_rank: usize,
    /// Node 0's address, where rank 0 listens for the rendezvous (every rank's MASTER_ADDR).
    #[arg(long, default_value = "127.0.0.1")]
    master_addr: String,
    /// Default (or 0): a free port, one node only; required with several nodes.
    #[arg(long)]
    master_port: Option<u16>,
    /// Seconds ranks get to exit after a forwarded SIGINT/SIGTERM/SIGHUP before SIGKILL.
    #[arg(long, default_value = "10", value_parser = parse_grace)]
    grace_s: Duration,
    /// Start the job again, up to this many times, when a rank dies or fails (not by the
    /// user's fault: exit code 2 is not retried); the program resumes from its newest
    /// checkpoint (`train run` does). One node only.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1000))]
    max_restarts: u32,
    /// The program and its arguments, after `--`.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

fn parse_grace(v: &str) -> Result<Duration, String> {
    match v.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && (0.0..=MAX_GRACE_S).contains(&s) => {
            Ok(Duration::from_secs_f64(s))
        }
        _ => Err(format!(
            "{v:?} is not a number of seconds between 0 and {MAX_GRACE_S}"
        )),
    }
}

fn main() {
    let a = Args::parse();
    let spec = LaunchSpec {
        nproc_per_node: a.nproc_per_node,
        nnodes: a.nnodes,
        node_rank: a.node_rank,
        master_addr: a.master_addr,
        master_port: a.master_port,
        program: a.command[0].clone(),
        args: a.command[1..].to_vec(),
        env: Vec::new(),
        grace: a.grace_s,
        max_restarts: a.max_restarts as usize,
    };
    match run(&spec) {
        Ok(()) => {}
        Err(e) => {
            eprintln!("comm-launch: {e}");
            let code = match e {
                CommError::Interrupted { signo, .. } => 128 + signo,
                _ => 1,
            };
            std::process::exit(code);
        }
    }
}

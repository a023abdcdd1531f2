//! `comm-launch`: start one process per GPU with the torchrun environment.
//!
//! One node:   comm-launch --nproc-per-node 2 -- ./bench allreduce
//! Two nodes:  comm-launch --nnodes 2 --node-rank $NODE --master-addr host0 --master-port 29500 \
//!               --nproc-per-node 8 -- ./train ...

use clap::Parser;
use comm::launch::{run, LaunchSpec};

#[derive(Parser)]
#[command(about = "Launch one process per GPU (torchrun conventions); fail all if one fails")]
struct Args {
    /// Processes (GPUs) on this node.
    #[arg(long, alias = "gpus", default_value_t = 1)]
    nproc_per_node: usize,
    #[arg(long, default_value_t = 1)]
    nnodes: usize,
    #[arg(long, default_value_t = 0)]
    node_rank: usize,
    #[arg(long, default_value = "127.0.0.1")]
    master_addr: String,
    /// Default: a free port (one node) — required with several nodes.
    #[arg(long)]
    master_port: Option<u16>,
    /// The program and its arguments, after `--`.
    #[arg(last = true, required = true)]
    command: Vec<String>,
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
    };
    if let Err(e) = run(&spec) {
        eprintln!("comm-launch: {e}");
        std::process::exit(1);
    }
}

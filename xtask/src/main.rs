//! `cargo xtask`: the project's automation, in Rust (rust-analyzer's xtask habit).
//!
//!   cargo xtask ci                 the test command: fmt, clippy, tests, examples, CUDA build
//!   cargo xtask toolchain          install the pinned CUDA 13.0 build toolchain (idempotent)
//!   cargo xtask bench [--gpus N]   build, run every benchmark, write report/
//!   cargo xtask gpu-pack [JOB..]   build CUDA binaries, pack them into .gpu/, print the run command
//!   cargo xtask launch --gpus N -- PROGRAM ARGS   start N ranks (comm-launch)
//!   cargo xtask train [--gpus N] -- ARGS  build train (with CUDA where a GPU is) and run it
//!   cargo xtask plan [--config F] [--json] ...  memory/communication accounting calculator
//!   cargo xtask plan --model 6.7B --world 4 --batch 8 --bf16   the memory plan per strategy

mod bench_plan;
mod cmd;
mod gpu;
mod plan;
mod plan_math;
mod plan_model;
mod plan_render;
mod train;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(about = "Project automation")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Everything CI checks: cargo fmt --check, clippy -D warnings, tests (CPU), the
    /// examples (CPU), and the CUDA build of every crate (installs the toolchain first).
    Ci {
        /// Skip the CUDA build (quick local loop).
        #[arg(long)]
        no_cuda: bool,
    },
    /// Install the CUDA 13.0 build toolchain into .cuda-toolchain/ and print its env.
    Toolchain,
    /// Run every benchmark and write report/ (CPU backend when --gpus is 0 or absent).
    Bench {
        /// GPUs: 0 runs every benchmark on the CPU backend; N builds with CUDA and runs
        /// them at xl on N GPUs (the multi-GPU ones at each world up to N).
        #[arg(long, default_value_t = 0)]
        gpus: usize,
        /// Where results.jsonl (started afresh), report.md and the plots go; relative to
        /// the workspace root.
        #[arg(long, default_value = "report")]
        out: String,
    },
    /// Build the CUDA binaries, pack them with the runner into .gpu/, print the `run` call.
    GpuPack {
        /// Jobs for the runner (default: check allreduce anchor-allreduce report).
        jobs: Vec<String>,
    },
    /// Launch N ranks of a program with the torchrun environment.
    Launch {
        /// Ranks to start on this node (comm-launch --nproc-per-node), one a GPU.
        #[arg(long)]
        gpus: usize,
        /// The program and its arguments, after `--`.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Train from one command: with a GPU visible, install the CUDA toolchain, build
    /// `train` with CUDA and run `train ARGS` (on N GPUs under comm-launch); else the CPU.
    Train {
        /// GPUs (default: 1 if one is visible, else the CPU).
        #[arg(long)]
        gpus: Option<usize>,
        /// `train`'s arguments, after `--`.
        #[arg(last = true, required = true)]
        args: Vec<String>,
    },
    /// Memory and communication accounting of a Transformer (CS336 assignment 2): parameters,
    /// FP32 state, activations, GPUs needed, N_FSDP, compute-bound mesh batch, DDP buckets;
    /// with --model SIZE, the per-GPU memory plan of each data-parallel strategy (`train`'s).
    Plan(Box<plan::PlanArgs>),
}

fn main() {
    let cli = Cli::parse();
    let r: Result<()> = match cli.cmd {
        Cmd::Ci { no_cuda } => cmd::ci(!no_cuda),
        Cmd::Toolchain => gpu::toolchain_env().map(|env| {
            for (k, v) in env {
                println!("export {k}={v}");
            }
        }),
        Cmd::Bench { gpus, out } => cmd::bench(gpus, &out),
        Cmd::GpuPack { jobs } => gpu::pack(&jobs),
        Cmd::Launch { gpus, command } => cmd::launch(gpus, &command),
        Cmd::Train { gpus, args } => train::train(gpus, &args),
        Cmd::Plan(args) => plan::run(&args),
    };
    if let Err(e) = r {
        eprintln!("xtask: error: {e:#}");
        std::process::exit(1);
    }
}

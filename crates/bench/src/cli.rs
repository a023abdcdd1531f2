//! The `bench` command line (clap): one subcommand per benchmark or check.

pub use crate::cmd::Cmd;
use clap::{Parser, ValueEnum};

/// A bucket size, as `ddp::Strategy::validate` accepts it (clap names the flag on error).
pub(crate) fn positive_mb(s: &str) -> Result<f64, String> {
    let bad = || format!("{s:?} is not a positive number of MiB");
    let mb: f64 = s.trim().parse().map_err(|_| bad())?;
    ddp::Strategy::Bucketed { bucket_mb: mb }
        .validate()
        .map_err(|_| bad())?;
    Ok(mb)
}

/// The most timed steps, iterations or warm-up steps a run takes (a bound on the loops and
/// on the per-step timing buffers).
pub const MAX_STEPS: usize = 1_000_000;
/// The most ranks one `bench` starts on this node (CPU threads or local GPUs).
pub const MAX_RANKS: usize = 256;

fn whole(s: &str, lo: usize, hi: usize) -> Result<usize, String> {
    let n: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a whole number"))?;
    if n < lo {
        return Err(format!("{n} is below {lo}"));
    }
    if n > hi {
        return Err(format!("{n} is above the bound of {hi}"));
    }
    Ok(n)
}

/// Timed steps or iterations: 1..=[`MAX_STEPS`].
pub(crate) fn steps(s: &str) -> Result<usize, String> {
    whole(s, 1, MAX_STEPS)
}

/// Untimed warm-up steps: 0..=[`MAX_STEPS`].
pub(crate) fn warmup(s: &str) -> Result<usize, String> {
    whole(s, 0, MAX_STEPS)
}

/// A rank count: 1..=[`MAX_RANKS`].
pub(crate) fn ranks(s: &str) -> Result<usize, String> {
    whole(s, 1, MAX_RANKS)
}

/// zero1-check's global batch of tiny-LM sequences: 1..=4096 (a few MB each on a rank).
pub(crate) fn check_batch(s: &str) -> Result<usize, String> {
    whole(s, 1, 4096)
}

/// Sequences or rows: at least 1 (what they allocate is checked against the memory there
/// is before the run, `budget`).
pub(crate) fn at_least_1(s: &str) -> Result<usize, String> {
    whole(s, 1, usize::MAX)
}

#[derive(Parser)]
#[command(about = "Benchmarks of the data-parallel stack")]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendArg {
    /// nccl where this binary was built with CUDA and a GPU is visible, else cpu (the
    /// choice is printed).
    Auto,
    Nccl,
    Cpu,
}

impl BackendArg {
    /// `Auto` made concrete (comm::Backend::auto), the choice and why printed on stderr.
    pub fn resolve(self) -> BackendArg {
        match self {
            BackendArg::Auto => {
                let (b, why) = comm::Backend::auto();
                // Once: the ranks a sweep spawns re-run this command line (RANK set).
                if comm::env::prints_for_all_ranks() {
                    eprintln!("bench: device: {why}; --backend nccl|cpu to choose");
                }
                match b {
                    comm::Backend::Nccl => BackendArg::Nccl,
                    comm::Backend::Cpu => BackendArg::Cpu,
                }
            }
            b => b,
        }
    }
}

/// Whether a one-process benchmark runs on the CPU: `--cpu`, or no usable GPU (said why).
pub fn on_cpu(cpu_flag: bool) -> bool {
    cpu_flag || BackendArg::Auto.resolve() == BackendArg::Cpu
}

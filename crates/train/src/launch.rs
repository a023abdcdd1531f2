//! Where the ranks run: threads of this process (CPU, `--world N`), or this process as one
//! rank under a launcher (`comm-launch`, torchrun or srun set RANK / WORLD_SIZE or SLURM_*):
//! the multi-process CPU backend or NCCL. One NCCL rank needs no launcher (`--backend
//! nccl --world 1`: GPU 0, or the first of CUDA_VISIBLE_DEVICES). `--backend auto` (the
//! default) takes the GPU where the binary was built with CUDA and one is visible, and
//! says which it took.

use anyhow::{anyhow, bail, Result};
use candle_core::Device;
use comm::{CommOptions, Communicator};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    /// The GPU (NCCL) where this binary was built with CUDA and one is visible; else the
    /// CPU.
    Auto,
    Cpu,
    Nccl,
}

impl Backend {
    /// The backend `Auto` stands for here, and why (a line for the user).
    pub fn resolve(self) -> (Backend, String) {
        match self {
            Backend::Cpu => (Backend::Cpu, "cpu (--backend cpu)".into()),
            Backend::Nccl => (Backend::Nccl, "cuda (--backend nccl)".into()),
            Backend::Auto => match comm::Backend::auto() {
                (comm::Backend::Nccl, why) => {
                    (Backend::Nccl, format!("{why}; --backend cpu for the CPU"))
                }
                (comm::Backend::Cpu, why) => (Backend::Cpu, why),
            },
        }
    }
}

/// The most CPU ranks `run` starts as threads of this process (50,000 threads aborted in
/// their stacks' set-up).
pub const MAX_THREAD_RANKS: usize = 1024;

/// Whether a launcher (comm-launch, torchrun, Slurm) started this process as one rank.
pub fn launched() -> bool {
    std::env::var_os("RANK").is_some() || std::env::var_os("SLURM_PROCID").is_some()
}

/// Which start of the job this is under a launcher or scheduler that starts failed jobs
/// again: 0 the first, N the N-th restart; the largest of comm-launch's
/// `COMM_RESTART_COUNT` (`--max-restarts`), torchrun's `TORCHELASTIC_RESTART_COUNT` and
/// Slurm's `SLURM_RESTART_COUNT` (a requeued job; comm-launch may run inside it), 0
/// without any.
pub fn restart_count() -> u64 {
    restart_count_in(|k| std::env::var(k).ok())
}

/// [`restart_count`] over any variable source.
pub fn restart_count_in(var: impl Fn(&str) -> Option<String>) -> u64 {
    [
        "COMM_RESTART_COUNT",
        "TORCHELASTIC_RESTART_COUNT",
        "SLURM_RESTART_COUNT",
    ]
    .iter()
    .filter_map(|k| var(k)?.trim().parse().ok())
    .max()
    .unwrap_or(0)
}

/// Runs `f` on every rank; returns rank 0's result (or the first error, naming the rank).
pub fn run<T: Send>(
    backend: Backend,
    world: usize,
    f: impl Fn(Arc<dyn Communicator>, Device) -> Result<T> + Sync,
) -> Result<Option<T>> {
    let (backend, why) = backend.resolve();
    if comm::env::prints_for_all_ranks() {
        eprintln!("train: device: {why}");
    }
    match backend {
        Backend::Auto => unreachable!("resolved above"),
        Backend::Cpu if launched() => {
            let (_, c) = comm::init_from_env(comm::Backend::Cpu, CommOptions::from_env()?)?;
            let c: Arc<dyn Communicator> = Arc::from(c);
            let rank = c.rank();
            let out = f(c, Device::Cpu)?;
            Ok((rank == 0).then_some(out))
        }
        Backend::Cpu => {
            if world > MAX_THREAD_RANKS {
                return crate::users(Err(anyhow!(
                    "--world {world}: at most {MAX_THREAD_RANKS} CPU ranks run as threads of one \
                     process; more run as processes (comm-launch --nproc-per-node N, torchrun)"
                )));
            }
            let comms = comm::cpu_group(world, CommOptions::from_env()?)?;
            std::thread::scope(|s| {
                let hs: Vec<_> = comms
                    .into_iter()
                    .enumerate()
                    .map(|(r, c)| {
                        let f = &f;
                        std::thread::Builder::new()
                            .name(format!("rank {r}"))
                            .spawn_scoped(s, move || f(Arc::new(c), Device::Cpu))
                    })
                    .collect::<std::io::Result<_>>()?;
                let mut first = None;
                for (r, h) in hs.into_iter().enumerate() {
                    let out = h.join().map_err(|_| anyhow!("rank {r} panicked"))?;
                    match out {
                        Ok(v) if r == 0 => first = Some(v),
                        Ok(_) => {}
                        Err(e) => return Err(e.context(format!("rank {r}"))),
                    }
                }
                Ok(first)
            })
        }
        Backend::Nccl => {
            let env = if launched() {
                comm::DistEnv::from_env()?
            } else if world == 1 {
                // A world of one: no rendezvous, no store.
                comm::DistEnv {
                    rank: 0,
                    world_size: 1,
                    local_rank: 0,
                    master_addr: "127.0.0.1".into(),
                    master_port: comm::env::DEFAULT_PORT,
                }
            } else {
                bail!("the GPU backend runs one process per GPU: start {world} ranks under comm-launch, torchrun or srun (e.g. comm-launch --nproc-per-node {world} -- train run ...), run one with --world 1, or CPU threads with --backend cpu");
            };
            let c = comm::NcclComm::new(&env, env.local_rank, CommOptions::from_env()?)?;
            let dev = c.device().clone();
            let rank = env.rank;
            let out = f(Arc::new(c), dev)?;
            Ok((rank == 0).then_some(out))
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_restart_is_the_largest_count_any_launcher_or_scheduler_set() {
        let of = |vars: &[(&str, &str)]| {
            super::restart_count_in(|k| vars.iter().find(|v| v.0 == k).map(|v| v.1.to_string()))
        };
        assert_eq!(of(&[]), 0);
        assert_eq!(of(&[("COMM_RESTART_COUNT", "2")]), 2);
        assert_eq!(of(&[("TORCHELASTIC_RESTART_COUNT", "1")]), 1);
        // comm-launch's first start inside a job Slurm requeued once: a restart.
        assert_eq!(
            of(&[("COMM_RESTART_COUNT", "0"), ("SLURM_RESTART_COUNT", "1")]),
            1
        );
        assert_eq!(of(&[("COMM_RESTART_COUNT", "x")]), 0);
    }
}

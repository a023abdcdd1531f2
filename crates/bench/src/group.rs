//! Running a benchmark body on every rank of a group: CPU threads over one in-process
//! group, or this process as one launched rank (RANK set: NCCL, or the multi-process CPU
//! backend), or the launcher of all GPU ranks (which re-runs this binary with the same
//! arguments under the torchrun environment).

use anyhow::{bail, Context, Result};
use candle_core::Device;
use comm::{CommOptions, Communicator, NcclComm};
use std::sync::Arc;

/// What a rank's body gets.
pub struct Rank {
    pub comm: Arc<dyn Communicator>,
    /// The same communicator, concretely NCCL (timelines), when on GPUs.
    pub nccl: Option<Arc<NcclComm>>,
    pub device: Device,
}

/// Runs `body` on `ranks` ranks; `header`, if any, is printed once (by the CPU group or
/// NCCL rank 0).
pub fn run(
    nccl: bool,
    ranks: usize,
    what: &str,
    header: Option<&str>,
    body: impl Fn(Rank) -> Result<()> + Sync,
) -> Result<()> {
    if ranks == 0 {
        bail!("--ranks must be at least 1");
    }
    if !nccl && std::env::var_os("RANK").is_some() {
        // Under a launcher: one rank of the multi-process CPU backend (the launcher's
        // WORLD_SIZE ranks; `ranks` is not used).
        let (env, c) = comm::init_from_env(comm::Backend::Cpu, CommOptions::from_env()?)?;
        if let Some(h) = header.filter(|_| env.rank == 0) {
            println!("{h}");
        }
        return body(Rank {
            comm: Arc::from(c),
            nccl: None,
            device: Device::Cpu,
        });
    }
    if !nccl {
        if let Some(h) = header {
            println!("{h}");
        }
        let comms = comm::cpu_group(ranks, CommOptions::from_env()?)?;
        return std::thread::scope(|s| {
            let handles: Vec<_> = comms
                .into_iter()
                .map(|c| {
                    let body = &body;
                    s.spawn(move || {
                        body(Rank {
                            comm: Arc::new(c),
                            nccl: None,
                            device: Device::Cpu,
                        })
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("rank thread panicked"))
                .collect::<Result<Vec<_>>>()
                .map(|_| ())
        });
    }
    // A build without CUDA says so first, not that RANK is missing or no GPU is seen.
    if let Err(e @ comm::CommError::Unavailable { .. }) = comm::nccl::gpu_count() {
        return Err(e.into());
    }
    if std::env::var("RANK").is_ok() {
        let env = comm::DistEnv::from_env()?;
        let c = Arc::new(NcclComm::new(
            &env,
            env.local_rank,
            CommOptions::from_env()?,
        )?);
        let device = c.device().clone();
        if let Some(h) = header.filter(|_| env.rank == 0) {
            println!("{h}");
        }
        return body(Rank {
            comm: c.clone(),
            nccl: Some(c),
            device,
        });
    }
    let topo = crate::topology::probe()
        .context("no NVIDIA GPU found (nvidia-smi -L lists none); use --backend cpu")?;
    if ranks > topo.gpus {
        bail!("--ranks {ranks}: this node has {} GPUs", topo.gpus);
    }
    let exe = std::env::current_exe()?;
    let args: Vec<String> = std::env::args().skip(1).collect();
    comm::launch::run(&comm::launch::LaunchSpec::local(
        ranks,
        exe.to_string_lossy(),
        args,
    ))
    .with_context(|| format!("{what} on {ranks} GPUs"))?;
    Ok(())
}

//! `cargo xtask train [--gpus N] -- ARGS`: training from one command. With an NVIDIA GPU
//! visible (`nvidia-smi -L`) it installs the CUDA 13.0 build toolchain, builds `train` with
//! CUDA and runs `train ARGS` on the GPU (on N GPUs under `comm-launch`, one process each);
//! without one it builds for the CPU and says so.

use crate::cmd::{cargo, root, run};
use anyhow::{bail, Result};
use std::process::Command;

/// GPUs in `nvidia-smi -L`'s output (one `GPU i: …` line each).
fn count_gpus(list: &str) -> usize {
    list.lines().filter(|l| l.starts_with("GPU ")).count()
}

fn visible_gpus() -> usize {
    Command::new("nvidia-smi")
        .arg("-L")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or(0, |o| count_gpus(&String::from_utf8_lossy(&o.stdout)))
}

pub fn train(gpus: Option<usize>, args: &[String]) -> Result<()> {
    let visible = visible_gpus();
    let want = gpus.unwrap_or(visible.min(1));
    if want > visible {
        bail!("--gpus {want}: {visible} GPU(s) visible (nvidia-smi -L)");
    }
    let bin = |b: &str| root().join("target/release").join(b);
    if want == 0 {
        eprintln!("xtask train: no GPU visible (nvidia-smi -L): building for the CPU");
        run(cargo().args(["build", "--release", "-p", "train"]))?;
        return run(Command::new(bin("train")).args(args));
    }
    eprintln!("xtask train: {visible} GPU(s) visible: the CUDA toolchain, then a CUDA build");
    let env = crate::gpu::toolchain_env()?;
    let build = [
        "build",
        "--release",
        "-p",
        "train",
        "-p",
        "comm",
        "--features",
        "cuda",
    ];
    run(cargo().args(build).envs(env))?;
    if want == 1 {
        return run(Command::new(bin("train"))
            .args(args)
            .env("NCCL_NVLS_ENABLE", "0"));
    }
    let n = want.to_string();
    run(Command::new(bin("comm-launch"))
        .args(["--nproc-per-node", &n, "--"])
        .arg(bin("train"))
        .args(args)
        .env("NCCL_NVLS_ENABLE", "0"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn gpus_are_counted_from_nvidia_smi_lines() {
        let two = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-a)\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-b)\n";
        assert_eq!(super::count_gpus(two), 2);
        assert_eq!(super::count_gpus(""), 0);
        assert_eq!(super::count_gpus("No devices were found\n"), 0);
    }
}

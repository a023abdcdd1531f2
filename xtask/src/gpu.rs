//! The CUDA toolchain and the GPU run loop: build here (no GPU needed), pack into an
//! ignored folder, run on the GPU machine with the runner script.

use crate::cmd::{cargo, root, run};
use anyhow::{bail, Context, Result};
use std::process::Command;

/// Installs the pinned toolchain (idempotent) and returns the environment cargo needs.
/// The script reports progress on stderr and prints `export K=V` lines on stdout.
pub fn toolchain_env() -> Result<Vec<(String, String)>> {
    let script = root().join("scripts/install-cuda-toolchain.sh");
    eprintln!("$ bash {}", script.display());
    let out = Command::new("bash")
        .arg(&script)
        .current_dir(root())
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run {}", script.display()))?;
    if !out.status.success() {
        bail!(
            "{} failed ({}): the CUDA 13.0 toolchain comes from PyPI wheels (python3 -m pip)",
            script.display(),
            out.status
        );
    }
    let path = std::env::var("PATH").unwrap_or_default();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .to_string();
    let mut env = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        for kv in line.trim_start_matches("export ").split_whitespace() {
            let Some((k, v)) = kv.split_once('=') else {
                continue;
            };
            // The two shell forms the script prints: $PATH, and defaults the caller may override.
            let v = match k {
                "CUDA_COMPUTE_CAP" => std::env::var(k).unwrap_or_else(|_| "90".into()),
                "CUDAFORGE_THREADS" => std::env::var(k).unwrap_or_else(|_| cores.clone()),
                _ => v.replace("$PATH", &path),
            };
            env.push((k.to_string(), v));
        }
    }
    if !env.iter().any(|(k, _)| k == "CUDA_ROOT") {
        bail!("{} printed no CUDA_ROOT", script.display());
    }
    Ok(env)
}

const BINARIES: &[(&str, &str)] = &[
    ("bench", "bench"),
    ("comm", "comm-launch"),
    ("comm", "comm-selftest"),
    ("train", "train"),
];

/// Builds release CUDA binaries, copies them (stripped by the release profile) with the
/// runner and the PyTorch anchor into `.gpu/`, and prints the device call.
pub fn pack(jobs: &[String]) -> Result<()> {
    let env = toolchain_env()?;
    let mut build = cargo();
    build.args(["build", "--release", "--features", "cuda"]);
    for (pkg, _) in BINARIES {
        build.args(["-p", pkg]);
    }
    run(build.envs(env))?;
    let dest = root().join(".gpu");
    let _ = std::fs::remove_dir_all(&dest);
    std::fs::create_dir_all(dest.join("bin"))?;
    std::fs::create_dir_all(dest.join("anchors"))?;
    for (_, bin) in BINARIES {
        std::fs::copy(
            root().join("target/release").join(bin),
            dest.join("bin").join(bin),
        )
        .with_context(|| format!("copying {bin}"))?;
        // Compressed (about 3×: most of a binary is its embedded PTX text): the device
        // tool carries at most 64 MiB with the working tree; run.sh unpacks them.
        let mut gz = Command::new("gzip");
        gz.arg("-f").arg(dest.join("bin").join(bin));
        run(&mut gz).with_context(|| format!("compressing {bin} (gzip)"))?;
    }
    for f in ["run.sh", "train-jobs.sh"] {
        std::fs::copy(root().join("scripts/gpu").join(f), dest.join(f))?;
    }
    std::fs::copy(
        root().join("scripts/gpu/ncu_kernels.py"),
        dest.join("ncu_kernels.py"),
    )?;
    // run.sh's `ce-probe` job (and the call scripts that run it by name).
    std::fs::copy(
        root().join("scripts/gpu/checks/ce-probe.py"),
        dest.join("ce-probe.py"),
    )?;
    std::fs::copy(
        root().join("data/isoflops_curves.json"),
        dest.join("isoflops_curves.json"),
    )?;
    for f in [
        "run_torch.sh",
        "torch_baseline.py",
        "torch_best.py",
        "gloo_allreduce.py",
        "adamw_ref.py",
        "adamw_torch.py",
        "torch_train.py",
        "torch_train_best.py",
        "torch_ckpt.py",
    ] {
        std::fs::copy(
            root().join("scripts/anchors").join(f),
            dest.join("anchors").join(f),
        )?;
    }
    // The runs of `cargo xtask bench --gpus N` for the machines without Rust: one file per
    // GPU count, one run per line, arguments tab-separated; run.sh's `full` job reads them
    // (and train-speed-N.tsv, the train-speed cases).
    for n in [1usize, 2, 4, 8] {
        let runs =
            crate::bench_plan::bench_runs(n, "$RES/results.jsonl", std::path::Path::new("$RES"))?;
        let text: String = runs.iter().map(|r| r.join("\t") + "\n").collect();
        std::fs::write(dest.join(format!("bench-runs-{n}.tsv")), text)?;
        // And `train run`'s speed cases: rows a GPU, worlds, strategies, PyTorch's trainers.
        let cases: String = crate::bench_plan::train_speed_cases(n)
            .iter()
            .map(|c| {
                let (b, w, s, t) = (c.batch, &c.worlds, c.strategies, c.torch_parallel);
                format!("{b}\t{w}\t{s}\t{t}\n")
            })
            .collect();
        std::fs::write(dest.join(format!("train-speed-{n}.tsv")), cases)?;
    }
    // NCCL built from source by scripts/gpu/build-nccl.sh, where it was (for a device whose
    // NCCL predates 2.28.7; run.sh puts .gpu/nccl first on our binaries' LD_LIBRARY_PATH,
    // not PyTorch's, unless PACKED_NCCL=0).
    let nccl = root().join("target/nccl/libnccl.so.2.gz");
    if nccl.exists() {
        std::fs::create_dir_all(dest.join("nccl"))?;
        std::fs::copy(&nccl, dest.join("nccl/libnccl.so.2.gz")).context("copying target/nccl")?;
    }
    // The kernel tracer (run.sh's `trace` job): CUPTI from its wheel, built with gcc.
    let mut cupti = Command::new("bash");
    cupti.arg(root().join("scripts/cupti/build.sh"));
    run(&mut cupti).context("building the CUPTI tracer (scripts/cupti/build.sh)")?;
    let size: u64 = walk(&dest)?;
    if size > 60 << 20 {
        bail!(
            ".gpu/ is {} MiB: over the 64 MiB the device tool carries",
            size >> 20
        );
    }
    println!(
        "packed .gpu/ ({:.1} MiB). Device call:",
        size as f64 / (1u64 << 20) as f64
    );
    println!(
        "  run(kind=\"nvidia-h200-x2\", carry=[\".gpu\"], command=\"bash .gpu/run.sh {}\")",
        jobs.join(" ")
    );
    Ok(())
}

fn walk(dir: &std::path::Path) -> Result<u64> {
    let mut n = 0;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        n += if e.file_type()?.is_dir() {
            walk(&e.path())?
        } else {
            e.metadata()?.len()
        };
    }
    Ok(n)
}

//! Running cargo and the project's binaries.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root (xtask lives one level below it).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask is inside the workspace")
        .to_path_buf()
}

/// Runs a command in the workspace root, echoing it; fails naming it.
pub fn run(cmd: &mut Command) -> Result<()> {
    cmd.current_dir(root());
    eprintln!("$ {}", format!("{cmd:?}").replace('"', ""));
    let st = cmd
        .status()
        .with_context(|| format!("cannot start {cmd:?}"))?;
    if !st.success() {
        bail!("{cmd:?} failed ({st})");
    }
    Ok(())
}

pub fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

/// The examples `ci` runs (package, example).
pub const EXAMPLES: &[(&str, &str)] = &[
    ("ddp", "minimal"),
    ("ddp", "mlp_ddp"),
    ("zero1", "mlp_zero1"),
];

pub fn ci(cuda: bool) -> Result<()> {
    let t0 = std::time::Instant::now();
    run(cargo().args(["fmt", "--all", "--check"]))?;
    run(cargo().args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))?;
    // The API docs build without a broken intra-doc link.
    run(cargo()
        .args(["doc", "--workspace", "--no-deps", "--quiet"])
        .env("RUSTDOCFLAGS", "-D rustdoc::broken_intra_doc_links"))?;
    run(cargo().args(["test", "--workspace"]))?;
    // The examples: a user's candle-nn model trained with DDP and with ZeRO-1 (+ a
    // checkpoint round trip) on CPU ranks; each fails unless it equals single-process
    // training.
    for (pkg, example) in EXAMPLES {
        run(cargo().args(["run", "--quiet", "-p", pkg, "--example", example]))?;
    }
    if cuda {
        let env = crate::gpu::toolchain_env()?;
        run(cargo()
            .args(["build", "--workspace", "--features", "cuda"])
            .envs(env))?;
    }
    eprintln!(
        "xtask ci: all checks passed in {:.0} s",
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Builds `bench` (and `comm-launch`) and runs the benchmark pipeline into `out`.
pub fn bench(gpus: usize, out: &str) -> Result<()> {
    let out_dir = root().join(out);
    std::fs::create_dir_all(&out_dir)?;
    let results = out_dir.join("results.jsonl");
    let _ = std::fs::remove_file(&results);
    let bin = if gpus > 0 {
        let env = crate::gpu::toolchain_env()?;
        run(cargo()
            .args([
                "build",
                "--release",
                "-p",
                "bench",
                "-p",
                "comm",
                "-p",
                "train",
                "--features",
                "cuda",
            ])
            .envs(env))?;
        root().join("target/release/bench")
    } else {
        run(cargo().args(["build", "--release", "-p", "bench"]))?;
        root().join("target/release/bench")
    };
    let results_s = results.to_string_lossy().to_string();
    let runs = crate::bench_plan::bench_runs(gpus, &results_s, &out_dir)?;
    let bar = indicatif::ProgressBar::new(runs.len() as u64).with_style(
        indicatif::ProgressStyle::with_template("[{pos}/{len}] {bar:30} {elapsed} {msg}")
            .expect("static template"),
    );
    for args in &runs {
        bar.set_message(args[0].clone());
        bar.tick();
        run(Command::new(&bin).args(args).env("NCCL_NVLS_ENABLE", "0"))?;
        bar.inc(1);
    }
    bar.finish_with_message("benchmarks done");
    if gpus > 0 {
        let anchor = root().join("scripts/anchors/run_torch.sh");
        let has_torch = Command::new("python3")
            .args(["-c", "import torch"])
            .status()
            .is_ok_and(|s| s.success());
        let parts = match gpus {
            1 => &["single", "best", "ddp", "zero"][..],
            _ => &["allreduce", "single", "best", "ddp", "zero"][..],
        };
        if has_torch {
            run(Command::new("bash")
                .arg(anchor)
                .args(parts)
                .env("SIZES", "xl")
                // The strongest PyTorch: torch.compile with CUDA graphs (2-4 min compiling).
                .env("VARIANTS", "compile-ro")
                .env("OUT", &out_dir))?;
        } else {
            eprintln!(
                "xtask bench: python3 with PyTorch not found: no PyTorch columns in the report"
            );
        }
        // `train run`'s speed beside the PyTorch trainer: run.sh's train-speed job, from
        // the repository's binaries and anchors (issue 47's report: every strategy at
        // worlds 1, 2, 4 ... and at 32 rows a GPU, PyTorch DDP and FSDP2 at each world).
        for case in crate::bench_plan::train_speed_cases(gpus) {
            run(Command::new("bash")
                .arg(root().join("scripts/gpu/run.sh"))
                .arg("train-speed")
                .env("BIN", root().join("target/release"))
                .env("ANCHORS", root().join("scripts/anchors"))
                .env("OUT", &out_dir)
                .env("CASES", "xl:bf16")
                .env("TS_BATCH", case.batch.to_string())
                .env("TS_WORLDS", &case.worlds)
                .env("TS_STRATEGIES", case.strategies)
                .env("TS_TORCH_PARALLEL", case.torch_parallel)
                .env("TS_TORCH", if has_torch { "compile-ro" } else { " " }))?;
        }
    }
    // The anchor's lines, when it ran (`bench report` refuses a --torch file that is absent).
    let torch = out_dir.join("torch.jsonl");
    let mut report = Command::new(&bin);
    report.args(["report", "--results", &results_s]);
    if torch.exists() {
        report.arg("--torch").arg(&torch);
    }
    run(report.arg("--out").arg(&out_dir))?;
    Ok(())
}

pub fn launch(gpus: usize, command: &[String]) -> Result<()> {
    run(cargo().args(["build", "--release", "-p", "comm", "--bin", "comm-launch"]))?;
    let mut args = vec![
        "--nproc-per-node".to_string(),
        gpus.to_string(),
        "--".to_string(),
    ];
    args.extend(command.iter().cloned());
    run(Command::new(root().join("target/release/comm-launch"))
        .args(args)
        .env("NCCL_NVLS_ENABLE", "0"))
}

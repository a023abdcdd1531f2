//! `scaling-laws fit FILE [--json] [--plots DIR] ...` — see the crate README.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use scaling_laws::bootstrap::BootstrapOptions;
use scaling_laws::data::load_runs;
use scaling_laws::pipeline::{analyze, Options};
use scaling_laws::plot::write_plots;
use scaling_laws::report::{build_report, render_table};

#[derive(Parser)]
#[command(
    version,
    about = "Chinchilla compute-optimal scaling-law fits from IsoFLOP runs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Fit approaches 1-3 to a JSON array of {parameters, compute_budget, final_loss}.
    Fit {
        /// Input JSON file.
        file: PathBuf,
        /// Print the report as JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Write SVG plots into this directory (no plots unless given).
        #[arg(long, value_name = "DIR")]
        plots: Option<PathBuf>,
        /// Bootstrap resamples (0 disables the intervals).
        #[arg(long, default_value_t = 1000)]
        resamples: usize,
        /// Bootstrap RNG seed.
        #[arg(long, default_value_t = BootstrapOptions::default().seed)]
        seed: u64,
        /// L-BFGS starts for approach 3: the best N points of the 4,500-point grid (0 = all).
        #[arg(long, default_value_t = scaling_laws::parametric::FitOptions::default().starts)]
        starts: usize,
        /// Compute budgets (FLOPs) to predict at; repeatable.
        #[arg(long = "compute", value_name = "FLOPS", default_values_t = [1e23, 1e24])]
        computes: Vec<f64>,
        /// Time the full fit (grid + bootstrap) this many times and print timings to stderr.
        #[arg(long, value_name = "REPEATS", num_args = 0..=1, default_missing_value = "5")]
        bench_timing: Option<usize>,
    },
}

fn main() -> Result<()> {
    let Cli {
        command:
            Command::Fit {
                file,
                json,
                plots,
                resamples,
                seed,
                starts,
                computes,
                bench_timing,
            },
    } = Cli::parse();
    if let Some(c) = computes.iter().find(|c| !(c.is_finite() && **c > 0.0)) {
        anyhow::bail!("--compute must be finite and > 0, got {c}");
    }
    let runs = load_runs(&file).with_context(|| format!("loading {}", file.display()))?;
    let mut opts = Options {
        computes,
        bootstrap: BootstrapOptions { resamples, seed },
        ..Options::default()
    };
    opts.fit.starts = if starts == 0 { usize::MAX } else { starts };
    if let Some(repeats) = bench_timing {
        let mut times = Vec::new();
        for _ in 0..repeats.max(1) {
            let t = Instant::now();
            analyze(&runs, &opts)?;
            times.push(t.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        eprintln!(
            "bench-timing: full fit ({} runs, {} grid starts, {} resamples, {} threads): \
             min {:.3} s, median {:.3} s, max {:.3} s over {} repeats",
            runs.len(),
            opts.fit
                .starts
                .min(scaling_laws::parametric::initial_grid().len()),
            resamples,
            rayon::current_num_threads(),
            times[0],
            times[times.len() / 2],
            times[times.len() - 1],
            times.len()
        );
    }
    let analysis = analyze(&runs, &opts)?;
    let report = build_report(&analysis);
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!(
            "{}",
            render_table(&report, analysis.runs, analysis.budgets.len())
        );
    }
    if let Some(dir) = plots {
        for path in write_plots(&analysis, &dir)? {
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(())
}

//! `scaling-laws fit FILE [--json] [--plots DIR] ...` — see the crate README.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use scaling_laws::bootstrap::BootstrapOptions;
use scaling_laws::data::load_runs;
use scaling_laws::dedup::{describe, DuplicatePolicy};
use scaling_laws::pipeline::{analyze, Options, MAX_RESAMPLES};
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

/// What to do with records repeating earlier ones (same N and loss at the same budget).
#[derive(Clone, Copy, ValueEnum)]
enum Duplicates {
    /// Keep the first of each, drop the others and name them on stderr.
    Drop,
    /// Refuse the input, naming them.
    Refuse,
    /// Fit every record as given (copies narrow the bootstrap intervals).
    Keep,
}

/// Largest `--bench-timing` repeat count.
const MAX_REPEATS: u64 = 1000;

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
        /// Bootstrap resamples, 0 to 100000 (0 disables the intervals).
        #[arg(long, default_value_t = 1000,
              value_parser = clap::value_parser!(u64).range(0..=MAX_RESAMPLES as u64))]
        resamples: u64,
        /// Bootstrap RNG seed.
        #[arg(long, default_value_t = BootstrapOptions::default().seed)]
        seed: u64,
        /// L-BFGS starts for approach 3: the best N points of the 4,500-point grid, 0 to 4500
        /// (0 = all). On more than 1,024 runs they run on one term per (N, D) and the best 4
        /// optima are polished on all runs.
        #[arg(long, default_value_t = scaling_laws::parametric::FitOptions::default().starts as u64,
              value_parser = clap::value_parser!(u64).range(0..=4500))]
        starts: u64,
        /// Compute budgets (FLOPs) to predict at; repeatable.
        #[arg(long = "compute", value_name = "FLOPS", default_values_t = [1e23, 1e24])]
        computes: Vec<f64>,
        /// Time the full fit (grid + bootstrap) this many times, 1 to 1000, and print timings
        /// to stderr.
        #[arg(long, value_name = "REPEATS", num_args = 0..=1, default_missing_value = "5",
              value_parser = clap::value_parser!(u64).range(1..=MAX_REPEATS))]
        bench_timing: Option<u64>,
        /// Records repeating an earlier one: same parameters and final_loss at the same
        /// compute_budget (budgets equal to within 1e-9 relative, as in the fits).
        #[arg(long, value_enum, default_value_t = Duplicates::Drop)]
        duplicates: Duplicates,
        /// No progress on stderr (by default: a bar on a terminal, else a line every 5 s
        /// once a stage has run 2 s).
        #[arg(long)]
        no_progress: bool,
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
                duplicates,
                no_progress,
            },
    } = Cli::parse();
    if let Some(c) = computes.iter().find(|c| !(c.is_finite() && **c > 0.0)) {
        anyhow::bail!("--compute must be finite and > 0, got {c}");
    }
    let runs = load_runs(&file).with_context(|| format!("loading {}", file.display()))?;
    let mut opts = Options {
        computes,
        bootstrap: BootstrapOptions {
            // Bounded by the parser (MAX_RESAMPLES).
            resamples: resamples as usize,
            seed,
        },
        duplicates: match duplicates {
            Duplicates::Drop => DuplicatePolicy::Drop,
            Duplicates::Refuse => DuplicatePolicy::Refuse,
            Duplicates::Keep => DuplicatePolicy::Keep,
        },
        progress: !no_progress,
        ..Options::default()
    };
    opts.fit.starts = if starts == 0 {
        usize::MAX
    } else {
        starts as usize
    };
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
    let analysis = analyze(&runs, &opts).with_context(|| format!("fitting {}", file.display()))?;
    if !analysis.duplicates.is_empty() {
        let what = match duplicates {
            Duplicates::Keep => "kept (--duplicates keep)",
            _ => "dropped",
        };
        eprintln!(
            "warning: {}: {} record(s) repeat earlier ones (same parameters and \
             final_loss at the same compute_budget) and were {what}:\n{}",
            file.display(),
            analysis.duplicates.len(),
            describe(&analysis.duplicates, 20)
        );
    }
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

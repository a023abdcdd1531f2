//! Writes a large input for timing: every run of FILE repeated COPIES times with a loss
//! jittered by ±1e-6 relative (seeded, deterministic), as a JSON array on stdout.
//! `cargo run -p scaling-laws --release --example jitter_sweep -- data/isoflops_curves.json 900`
//! (72 runs × 900 = 64,800 distinct runs).

use std::io::Write;

use anyhow::Context;
use scaling_laws::data::load_runs;
use scaling_laws::synthetic::jittered_copies;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let file = args.next().context("usage: jitter_sweep FILE COPIES")?;
    let copies: usize = args
        .next()
        .context("usage: jitter_sweep FILE COPIES")?
        .parse()
        .context("COPIES must be a whole number")?;
    anyhow::ensure!((1..=100_000).contains(&copies), "COPIES must be 1..=100000");
    let runs = load_runs(file.as_ref()).with_context(|| format!("loading {file}"))?;
    let records: Vec<serde_json::Value> = jittered_copies(&runs, copies, 1e-6, 1)
        .iter()
        .map(|r| {
            serde_json::json!({
                "parameters": r.parameters,
                "compute_budget": r.compute_budget,
                "final_loss": r.final_loss,
            })
        })
        .collect();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    serde_json::to_writer(&mut out, &records)?;
    writeln!(out)?;
    Ok(())
}

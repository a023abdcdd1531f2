//! Times the full fit (approach-3 grid + 1,000 bootstrap resamples) on noisy synthetic data:
//! 9 budgets × 8 sizes drawn from the Chinchilla law with 1% log-normal noise on the loss.
//! `cargo run -p scaling-laws --release --example bench_fit [-- REPEATS]`
//! (for the shipped data use `scaling-laws fit FILE --bench-timing`).

use std::time::Instant;

use scaling_laws::pipeline::{analyze, Options};
use scaling_laws::report::build_report;
use scaling_laws::synthetic::{isoflop_sweeps, log_budgets, with_log_noise, CHINCHILLA};

fn main() -> anyhow::Result<()> {
    let repeats: usize = match std::env::args().nth(1) {
        Some(s) => s.parse()?,
        None => 5,
    };
    let clean = isoflop_sweeps(&CHINCHILLA, &log_budgets(18.0, 22.0, 0.5), 8, 0.75);
    let runs = with_log_noise(&clean, 0.01, 7);
    let opts = Options::default();
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..repeats.max(1) {
        let t = Instant::now();
        last = Some(analyze(&runs, &opts)?);
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    if let Some(an) = last {
        let r = build_report(&an);
        println!(
            "fit: alpha = {:.4}, beta = {:.4} (true 0.34, 0.28); a1 = {:.4}, a2 = {:.4} (true {:.4})",
            r.approach3.law.alpha,
            r.approach3.law.beta,
            r.approach1.n_exponent,
            r.approach2.n_exponent,
            CHINCHILLA.beta / (CHINCHILLA.alpha + CHINCHILLA.beta)
        );
    }
    println!(
        "full fit ({} runs, {} grid starts, {} resamples, {} threads): min {:.3} s, median {:.3} s, max {:.3} s over {} repeats",
        runs.len(),
        opts.fit.starts,
        opts.bootstrap.resamples,
        rayon::current_num_threads(),
        times[0],
        times[times.len() / 2],
        times[times.len() - 1],
        times.len()
    );
    Ok(())
}

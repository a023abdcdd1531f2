//! Synthetic IsoFLOP data drawn from a known parametric law (for tests and benchmarks).

use crate::data::Run;
use crate::parametric::ParametricLaw;

/// The Chinchilla fit of Hoffmann et al.: E=1.69, A=406.4, B=410.7, α=0.34, β=0.28.
pub const CHINCHILLA: ParametricLaw = ParametricLaw {
    e: 1.69,
    a: 406.4,
    b: 410.7,
    alpha: 0.34,
    beta: 0.28,
};

/// Noise-free IsoFLOP sweeps: for each budget, `sizes` model sizes spaced geometrically
/// over ±`half_width_decades` around the rule-of-thumb guess N ≈ √(C/120) (20 tokens per
/// parameter), not around the true optimum.
pub fn isoflop_sweeps(
    law: &ParametricLaw,
    budgets: &[f64],
    sizes: usize,
    half_width_decades: f64,
) -> Vec<Run> {
    let mut runs = Vec::with_capacity(budgets.len() * sizes);
    let steps = sizes.saturating_sub(1).max(1) as f64;
    for &c in budgets {
        let guess = (c / 120.0).sqrt();
        for k in 0..sizes {
            let offset = -half_width_decades + 2.0 * half_width_decades * k as f64 / steps;
            let n = guess * 10f64.powf(offset);
            let d = c / (6.0 * n);
            runs.push(Run {
                index: runs.len(),
                parameters: n,
                compute_budget: c,
                final_loss: law.loss(n, d),
            });
        }
    }
    runs
}

/// Budgets 10^lo, 10^(lo+step), … up to 10^hi.
pub fn log_budgets(lo: f64, hi: f64, step: f64) -> Vec<f64> {
    let count = ((hi - lo) / step).round() as usize + 1;
    (0..count)
        .map(|i| 10f64.powf(lo + step * i as f64))
        .collect()
}

/// Multiplies each loss by exp(σ·z), z ~ N(0, 1) (Box–Muller, seeded).
pub fn with_log_noise(runs: &[Run], sigma: f64, seed: u64) -> Vec<Run> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    runs.iter()
        .map(|r| {
            let u1: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
            let u2: f64 = rng.random();
            let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
            Run {
                final_loss: r.final_loss * (sigma * z).exp(),
                ..*r
            }
        })
        .collect()
}

/// Each run repeated `copies` times in a row, each copy's loss multiplied by
/// 1 + `relative`·(2u − 1), u uniform in [0, 1) (seeded): a large input of distinct runs with
/// the shape of the original sweep. Indices are the new positions.
pub fn jittered_copies(runs: &[Run], copies: usize, relative: f64, seed: u64) -> Vec<Run> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut out = Vec::with_capacity(runs.len() * copies);
    for r in runs {
        for _ in 0..copies {
            let u: f64 = rng.random();
            out.push(Run {
                index: out.len(),
                final_loss: r.final_loss * (1.0 + relative * (2.0 * u - 1.0)),
                ..*r
            });
        }
    }
    out
}

//! Bootstrap confidence intervals for every fitted quantity.
//!
//! Each resample draws, within every compute budget, as many runs as the budget has, with
//! replacement (a stratified bootstrap, so every budget stays represented). Resample `i` uses
//! its own RNG seeded with `seed + i`, so results do not depend on thread scheduling.
//! A resample is held as a count per run (the same draws, in the same order, as drawing runs);
//! approaches 1 and 2 are refitted from scratch on the runs it repeats, approach 3 with one
//! L-BFGS run warm-started from the full-data optimum on the full data reweighted by the
//! counts (see [`HuberProblem::reweighted`]). Resamples where a fit fails (e.g. a budget left
//! with fewer than 3 distinct sizes) are skipped for that approach and counted.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;

use crate::data::{group_by_budget, Budget, Run};
use crate::intervals::{parametric_intervals, power_intervals};
pub use crate::intervals::{
    percentile, BootstrapIntervals, Interval, ParametricIntervals, PowerLawIntervals,
    PredictionInterval,
};
use crate::isoflop::{approach1, approach2, IsoFlopFit};
use crate::parametric::{refit_problem, FitOptions, HuberProblem, ParametricLaw};

/// Bootstrap settings.
#[derive(Debug, Clone, Copy)]
pub struct BootstrapOptions {
    /// Number of resamples (0 disables the bootstrap).
    pub resamples: usize,
    /// Base RNG seed.
    pub seed: u64,
}

impl Default for BootstrapOptions {
    fn default() -> Self {
        BootstrapOptions {
            resamples: 1000,
            seed: 20220329,
        }
    }
}

/// Draws one stratified resample.
pub fn resample(budgets: &[Budget], rng: &mut StdRng) -> Vec<Run> {
    let mut out = Vec::new();
    for b in budgets {
        let k = b.runs.len();
        for _ in 0..k {
            out.push(b.runs[rng.random_range(0..k)]);
        }
    }
    out
}

fn law_stats(fit: &IsoFlopFit, computes: &[f64]) -> Vec<f64> {
    let mut v = vec![
        fit.n_law.coefficient,
        fit.n_law.exponent,
        fit.d_law.coefficient,
        fit.d_law.exponent,
    ];
    for &c in computes {
        let (n, d) = fit.predict(c);
        v.extend([n, d]);
    }
    v
}

fn parametric_stats(law: &ParametricLaw, computes: &[f64]) -> Vec<f64> {
    let mut v = vec![law.e, law.a, law.b, law.alpha, law.beta];
    for &c in computes {
        v.extend([law.n_opt(c), law.d_opt(c)]);
    }
    v
}

type Replicate = (Option<Vec<f64>>, Option<Vec<f64>>, Option<Vec<f64>>);

/// Draws one stratified resample as a count per run of `budgets` (in budget order), making
/// the same draws as [`resample`].
pub fn resample_counts(budgets: &[Budget], rng: &mut StdRng) -> Vec<u32> {
    let mut counts = Vec::with_capacity(budgets.iter().map(|b| b.runs.len()).sum());
    for b in budgets {
        let k = b.runs.len();
        let first = counts.len();
        counts.resize(first + k, 0);
        for _ in 0..k {
            counts[first + rng.random_range(0..k)] += 1;
        }
    }
    counts
}

/// The budgets of a resample: each run repeated as often as it was drawn (sorted by size).
fn expand(budgets: &[Budget], counts: &[u32]) -> Vec<Budget> {
    let mut at = 0;
    budgets
        .iter()
        .map(|b| {
            let mut runs = Vec::with_capacity(b.runs.len());
            for r in &b.runs {
                runs.extend(std::iter::repeat_n(*r, counts[at] as usize));
                at += 1;
            }
            Budget {
                compute: b.compute,
                runs,
            }
        })
        .collect()
}

/// Runs the bootstrap. `start` is the full-data approach-3 optimum used as warm start.
pub fn bootstrap(
    runs: &[Run],
    start: &ParametricLaw,
    computes: &[f64],
    opts: &BootstrapOptions,
    fit_opts: &FitOptions,
) -> BootstrapIntervals {
    bootstrap_with_progress(runs, start, computes, opts, fit_opts, &|| {})
}

/// [`bootstrap`], calling `tick` after each resample (from rayon's threads).
pub fn bootstrap_with_progress(
    runs: &[Run],
    start: &ParametricLaw,
    computes: &[f64],
    opts: &BootstrapOptions,
    fit_opts: &FitOptions,
    tick: &(dyn Fn() + Sync),
) -> BootstrapIntervals {
    let budgets = group_by_budget(runs);
    let flat: Vec<Run> = budgets
        .iter()
        .flat_map(|b| b.runs.iter().copied())
        .collect();
    let problem = HuberProblem::new(&flat, fit_opts.delta);
    let start = problem.to_params(start);
    let replicates: Vec<Replicate> = (0..opts.resamples)
        .into_par_iter()
        .map(|i| {
            let mut rng = StdRng::seed_from_u64(opts.seed.wrapping_add(i as u64));
            let counts = resample_counts(&budgets, &mut rng);
            let groups = expand(&budgets, &counts);
            let r1 = approach1(&groups).ok().map(|f| law_stats(&f, computes));
            let r2 = approach2(&groups).ok().map(|f| law_stats(&f, computes));
            let r3 = refit_problem(&problem.reweighted(&counts), &start, fit_opts)
                .ok()
                .map(|f| parametric_stats(&f.law, computes));
            tick();
            (r1, r2, r3)
        })
        .collect();
    let mut s1 = Vec::new();
    let mut s2 = Vec::new();
    let mut s3 = Vec::new();
    for (r1, r2, r3) in replicates {
        s1.extend(r1);
        s2.extend(r2);
        s3.extend(r3);
    }
    BootstrapIntervals {
        approach1: power_intervals(&s1, computes),
        approach2: power_intervals(&s2, computes),
        approach3: parametric_intervals(&s3, computes),
    }
}

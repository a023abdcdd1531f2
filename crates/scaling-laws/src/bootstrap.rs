//! Bootstrap confidence intervals for every fitted quantity.
//!
//! Each resample draws, within every compute budget, as many runs as the budget has, with
//! replacement (a stratified bootstrap, so every budget stays represented). Resample `i` uses
//! its own RNG seeded with `seed + i`, so results do not depend on thread scheduling.
//! Approaches 1 and 2 are refitted from scratch; approach 3 is refitted with one L-BFGS run
//! warm-started from the full-data optimum. Resamples where a fit fails (e.g. a budget left
//! with fewer than 3 distinct sizes) are skipped for that approach and counted.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use serde::Serialize;

use crate::data::{group_by_budget, Budget, Run};
use crate::isoflop::{approach1, approach2, IsoFlopFit};
use crate::parametric::{refit_from, FitOptions, ParametricLaw};

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

/// A 95% percentile interval, serialised as `[lo, hi]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    /// 2.5th percentile.
    pub lo: f64,
    /// 97.5th percentile.
    pub hi: f64,
}

impl Serialize for Interval {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        [self.lo, self.hi].serialize(s)
    }
}

/// Intervals of N_opt and D_opt at one compute budget.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PredictionInterval {
    /// Compute budget.
    pub compute: f64,
    /// Interval of N_opt.
    pub n_opt: Interval,
    /// Interval of D_opt.
    pub d_opt: Interval,
}

/// Intervals for approach 1 or 2.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PowerLawIntervals {
    /// k in N_opt = k·C^a.
    pub n_coefficient: Interval,
    /// a.
    pub n_exponent: Interval,
    /// m in D_opt = m·C^b.
    pub d_coefficient: Interval,
    /// b.
    pub d_exponent: Interval,
    /// Per-budget prediction intervals.
    pub predictions: Vec<PredictionInterval>,
    /// Resamples whose fit succeeded.
    pub resamples: usize,
}

/// Intervals for approach 3.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParametricIntervals {
    /// E.
    #[serde(rename = "E")]
    pub e: Interval,
    /// A.
    #[serde(rename = "A")]
    pub a: Interval,
    /// B.
    #[serde(rename = "B")]
    pub b: Interval,
    /// α.
    pub alpha: Interval,
    /// β.
    pub beta: Interval,
    /// Per-budget prediction intervals.
    pub predictions: Vec<PredictionInterval>,
    /// Resamples whose fit succeeded.
    pub resamples: usize,
}

/// Intervals of all three approaches (`None` where no resample succeeded).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BootstrapIntervals {
    /// Approach 1.
    pub approach1: Option<PowerLawIntervals>,
    /// Approach 2.
    pub approach2: Option<PowerLawIntervals>,
    /// Approach 3.
    pub approach3: Option<ParametricIntervals>,
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

/// Linear-interpolated percentile of sorted data, `q` in [0, 1].
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let (i, frac) = (pos.floor() as usize, pos.fract());
    let j = (i + 1).min(sorted.len() - 1);
    sorted[i] * (1.0 - frac) + sorted[j] * frac
}

/// 95% percentile intervals of each column of `samples`.
fn columns(samples: &[Vec<f64>]) -> Vec<Interval> {
    let width = samples.first().map_or(0, Vec::len);
    (0..width)
        .map(|k| {
            let mut col: Vec<f64> = samples.iter().map(|s| s[k]).collect();
            col.sort_by(f64::total_cmp);
            Interval {
                lo: percentile(&col, 0.025),
                hi: percentile(&col, 0.975),
            }
        })
        .collect()
}

fn predictions(iv: &[Interval], computes: &[f64]) -> Vec<PredictionInterval> {
    computes
        .iter()
        .enumerate()
        .map(|(i, &compute)| PredictionInterval {
            compute,
            n_opt: iv[2 * i],
            d_opt: iv[2 * i + 1],
        })
        .collect()
}

fn power_intervals(samples: &[Vec<f64>], computes: &[f64]) -> Option<PowerLawIntervals> {
    if samples.is_empty() {
        return None;
    }
    let iv = columns(samples);
    Some(PowerLawIntervals {
        n_coefficient: iv[0],
        n_exponent: iv[1],
        d_coefficient: iv[2],
        d_exponent: iv[3],
        predictions: predictions(&iv[4..], computes),
        resamples: samples.len(),
    })
}

fn parametric_intervals(samples: &[Vec<f64>], computes: &[f64]) -> Option<ParametricIntervals> {
    if samples.is_empty() {
        return None;
    }
    let iv = columns(samples);
    Some(ParametricIntervals {
        e: iv[0],
        a: iv[1],
        b: iv[2],
        alpha: iv[3],
        beta: iv[4],
        predictions: predictions(&iv[5..], computes),
        resamples: samples.len(),
    })
}

type Replicate = (Option<Vec<f64>>, Option<Vec<f64>>, Option<Vec<f64>>);

/// Runs the bootstrap. `start` is the full-data approach-3 optimum used as warm start.
pub fn bootstrap(
    runs: &[Run],
    start: &ParametricLaw,
    computes: &[f64],
    opts: &BootstrapOptions,
    fit_opts: &FitOptions,
) -> BootstrapIntervals {
    let budgets = group_by_budget(runs);
    let replicates: Vec<Replicate> = (0..opts.resamples)
        .into_par_iter()
        .map(|i| {
            let mut rng = StdRng::seed_from_u64(opts.seed.wrapping_add(i as u64));
            let sample = resample(&budgets, &mut rng);
            let groups = group_by_budget(&sample);
            let r1 = approach1(&groups).ok().map(|f| law_stats(&f, computes));
            let r2 = approach2(&groups).ok().map(|f| law_stats(&f, computes));
            let r3 = refit_from(&sample, start, fit_opts)
                .ok()
                .map(|f| parametric_stats(&f.law, computes));
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

//! Approach 3: the parametric loss L(N, D) = E + A/N^α + B/D^β (Hoffmann et al. 2022).
//!
//! Minimises Σ Huber_δ(LSE(a − α ln N, b − β ln D, e) − ln L) with A = eᵃ, B = eᵇ, E = eᵉ
//! using argmin's L-BFGS with an analytic gradient. Internally ln N and ln D are centred
//! (a' = a − α·mean ln N, likewise b') which leaves the objective unchanged but makes the
//! problem far better conditioned.

use rayon::prelude::*;
use serde::Serialize;

use crate::data::Run;
use crate::error::FitError;
pub use crate::huber::HuberProblem;
use crate::optimizer::minimize;

/// Huber threshold used by Hoffmann et al.
pub const HUBER_DELTA: f64 = 1e-3;

/// L(N, D) = E + A/N^α + B/D^β.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ParametricLaw {
    /// Irreducible loss E.
    #[serde(rename = "E")]
    pub e: f64,
    /// Model-size term coefficient A.
    #[serde(rename = "A")]
    pub a: f64,
    /// Data term coefficient B.
    #[serde(rename = "B")]
    pub b: f64,
    /// Model-size exponent α.
    pub alpha: f64,
    /// Data exponent β.
    pub beta: f64,
}

impl ParametricLaw {
    /// Predicted loss.
    pub fn loss(&self, n: f64, d: f64) -> f64 {
        self.e + self.a / n.powf(self.alpha) + self.b / d.powf(self.beta)
    }

    /// G = (αA / (βB))^(1/(α+β)).
    pub fn g(&self) -> f64 {
        (self.alpha * self.a / (self.beta * self.b)).powf(1.0 / (self.alpha + self.beta))
    }

    /// Compute-optimal model size N_opt(C) = G (C/6)^(β/(α+β)).
    pub fn n_opt(&self, c: f64) -> f64 {
        self.g() * (c / 6.0).powf(self.beta / (self.alpha + self.beta))
    }

    /// Compute-optimal tokens D_opt(C) = G⁻¹ (C/6)^(α/(α+β)).
    pub fn d_opt(&self, c: f64) -> f64 {
        (c / 6.0).powf(self.alpha / (self.alpha + self.beta)) / self.g()
    }
}

/// A fitted parametric law with its goodness of fit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ParametricFit {
    /// The fitted law.
    pub law: ParametricLaw,
    /// Huber objective (sum over runs) at the optimum.
    pub huber: f64,
    /// Root-mean-square error of ln L.
    pub rmse_log: f64,
}

/// Settings of the L-BFGS fit.
#[derive(Debug, Clone, Copy)]
pub struct FitOptions {
    /// Huber δ.
    pub delta: f64,
    /// Number of best grid points (by initial objective) from which L-BFGS is run.
    pub starts: usize,
    /// Iteration cap per L-BFGS run.
    pub max_iters: u64,
}

impl Default for FitOptions {
    fn default() -> Self {
        FitOptions {
            delta: HUBER_DELTA,
            starts: 256,
            max_iters: 1000,
        }
    }
}

/// Hoffmann et al.'s initialisation grid: α, β ∈ {0, 0.5, …, 2}, e ∈ {−1, −0.5, …, 1},
/// a, b ∈ {0, 5, …, 25} (4,500 points, in the original, uncentred coordinates).
pub fn initial_grid() -> Vec<ParametricLaw> {
    let mut grid = Vec::with_capacity(4500);
    for ia in 0..6 {
        for ib in 0..6 {
            for ie in 0..5 {
                for ial in 0..5 {
                    for ibe in 0..5 {
                        grid.push(ParametricLaw {
                            a: (5.0 * ia as f64).exp(),
                            b: (5.0 * ib as f64).exp(),
                            e: (-1.0 + 0.5 * ie as f64).exp(),
                            alpha: 0.5 * ial as f64,
                            beta: 0.5 * ibe as f64,
                        });
                    }
                }
            }
        }
    }
    grid
}

fn finish(problem: &HuberProblem, p: &[f64]) -> Result<ParametricFit, FitError> {
    let law = problem.to_law(p);
    let ok = [law.e, law.a, law.b, law.alpha, law.beta]
        .iter()
        .all(|v| v.is_finite() && *v > 0.0);
    if !ok {
        return Err(FitError::Optimizer(format!(
            "optimum is not a valid law (need finite, positive E, A, B, α, β): {law:?}"
        )));
    }
    let (huber, rmse_log) = problem.goodness(p);
    Ok(ParametricFit {
        law,
        huber,
        rmse_log,
    })
}

/// Inputs of more runs than this choose their starts on [`HuberProblem::coarse`] (one term per
/// design point, at most this many) and polish the best [`POLISHED`] optima on every run.
pub const COARSE_RUNS: usize = 1024;

/// Distinct coarse optima polished on the full problem.
pub const POLISHED: usize = 4;

/// L-BFGS from the `opts.starts` best grid points (in parallel): the valid optima (finite
/// objective, positive exponents), best first (ties keep grid order), or the last error.
fn local_optima(
    problem: &HuberProblem,
    opts: &FitOptions,
    tick: &(dyn Fn() + Sync),
) -> Result<Vec<(Vec<f64>, f64)>, FitError> {
    let mut scored: Vec<(f64, Vec<f64>)> = initial_grid()
        .iter()
        .map(|law| {
            let p = problem.to_params(law);
            (problem.eval(&p, None), p)
        })
        .filter(|(c, _)| c.is_finite())
        .collect();
    scored.sort_by(|x, y| x.0.total_cmp(&y.0));
    scored.truncate(opts.starts.max(1));
    let results: Vec<Result<(Vec<f64>, f64), FitError>> = scored
        .into_par_iter()
        .map(|(_, p)| {
            let r = minimize(problem, p, opts.max_iters);
            tick();
            r
        })
        .collect();
    let mut optima = Vec::new();
    let mut last_err = None;
    for r in results {
        match r {
            Ok((p, c)) if c.is_finite() && p[3] > 0.0 && p[4] > 0.0 => optima.push((p, c)),
            Ok(_) => {}
            Err(e) => last_err = Some(e),
        }
    }
    optima.sort_by(|x, y| x.1.total_cmp(&y.1));
    if optima.is_empty() {
        return Err(last_err.unwrap_or_else(|| {
            FitError::Optimizer("no start converged to positive exponents".into())
        }));
    }
    Ok(optima)
}

/// Full fit: scores the whole grid, runs L-BFGS from the `opts.starts` best grid points
/// (in parallel) and keeps the lowest objective. On more than [`COARSE_RUNS`] runs the
/// grid and its starts run on the coarse problem and the best few optima are polished.
pub fn fit_parametric(runs: &[Run], opts: &FitOptions) -> Result<ParametricFit, FitError> {
    fit_problem(&HuberProblem::new(runs, opts.delta), opts, &|| {})
}

/// [`fit_parametric`] on a built problem; `tick` is called after each L-BFGS run.
pub fn fit_problem(
    problem: &HuberProblem,
    opts: &FitOptions,
    tick: &(dyn Fn() + Sync),
) -> Result<ParametricFit, FitError> {
    let Some(coarse) = problem.coarse(COARSE_RUNS) else {
        let optima = local_optima(problem, opts, tick)?;
        return finish(problem, &optima[0].0);
    };
    let mut picks: Vec<Vec<f64>> = Vec::new();
    for (p, _) in local_optima(&coarse, opts, tick)? {
        let distinct = picks
            .iter()
            .all(|q| q.iter().zip(&p).any(|(x, y)| (x - y).abs() > 1e-3));
        if distinct && picks.len() < POLISHED {
            picks.push(p);
        }
    }
    let polished: Vec<Result<(Vec<f64>, f64), FitError>> = picks
        .into_par_iter()
        .map(|p| {
            let r = minimize(problem, p, opts.max_iters);
            tick();
            r
        })
        .collect();
    let mut best: Option<(Vec<f64>, f64)> = None;
    let mut last_err = None;
    for r in polished {
        match r {
            Ok((p, c)) if c.is_finite() && p[3] > 0.0 && p[4] > 0.0 => {
                if best.as_ref().is_none_or(|b| c < b.1) {
                    best = Some((p, c));
                }
            }
            Ok(_) => {}
            Err(e) => last_err = Some(e),
        }
    }
    match best {
        Some((p, _)) => finish(problem, &p),
        None => Err(last_err.unwrap_or_else(|| {
            FitError::Optimizer("no polished start kept positive exponents".into())
        })),
    }
}

/// Single L-BFGS run warm-started from `start`.
pub fn refit_from(
    runs: &[Run],
    start: &ParametricLaw,
    opts: &FitOptions,
) -> Result<ParametricFit, FitError> {
    let problem = HuberProblem::new(runs, opts.delta);
    refit_problem(&problem, &problem.to_params(start), opts)
}

/// Single L-BFGS run on a built (e.g. reweighted) problem from parameters `start`
/// (used by the bootstrap).
pub fn refit_problem(
    problem: &HuberProblem,
    start: &[f64],
    opts: &FitOptions,
) -> Result<ParametricFit, FitError> {
    let (p, _) = minimize(problem, start.to_vec(), opts.max_iters)?;
    finish(problem, &p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn analytic_gradient_matches_finite_differences() {
        let runs: Vec<Run> = (0..20)
            .map(|i| Run {
                index: i,
                parameters: 1e7 * 1.7f64.powi(i as i32),
                compute_budget: 1e19 * 3f64.powi((i % 4) as i32),
                final_loss: 2.0 + 0.1 * (i % 5) as f64,
            })
            .collect();
        let prob = HuberProblem::new(&runs, 0.05);
        let p = vec![1.0, 0.5, 0.6, 0.3, 0.25];
        let mut g = [0.0; 5];
        prob.eval(&p, Some(&mut g));
        for k in 0..5 {
            let h = 1e-6;
            let mut hi = p.clone();
            hi[k] += h;
            let mut lo = p.clone();
            lo[k] -= h;
            let fd = (prob.eval(&hi, None) - prob.eval(&lo, None)) / (2.0 * h);
            assert!(
                (fd - g[k]).abs() < 1e-6 * (1.0 + fd.abs()),
                "{k}: {fd} vs {}",
                g[k]
            );
        }
    }

    #[test]
    fn closed_form_optimum_satisfies_budget() {
        let law = ParametricLaw {
            e: 1.69,
            a: 406.4,
            b: 410.7,
            alpha: 0.34,
            beta: 0.28,
        };
        let c = 1e23;
        let (n, d) = (law.n_opt(c), law.d_opt(c));
        assert!((6.0 * n * d / c - 1.0).abs() < 1e-10);
        // Loss is stationary along the iso-FLOP curve at the optimum.
        let l = |s: f64| law.loss(n * s, d / s);
        assert!(l(1.0) < l(1.01) && l(1.0) < l(0.99));
    }
}

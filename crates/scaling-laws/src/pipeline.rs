//! Runs all three approaches and the bootstrap on one data set.

use crate::bootstrap::{bootstrap, BootstrapIntervals, BootstrapOptions};
use crate::data::{group_by_budget, validate_runs, Budget, Run};
use crate::isoflop::{approach1, approach2, IsoFlopFit};
use crate::parametric::{fit_parametric, FitOptions, ParametricFit};

/// Settings for [`analyze`].
#[derive(Debug, Clone)]
pub struct Options {
    /// Compute budgets at which to predict N_opt and D_opt.
    pub computes: Vec<f64>,
    /// Bootstrap settings (`resamples: 0` skips it).
    pub bootstrap: BootstrapOptions,
    /// Full approach-3 fit (grid of starts).
    pub fit: FitOptions,
    /// Warm-started approach-3 refits inside the bootstrap.
    pub refit: FitOptions,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            computes: vec![1e23, 1e24],
            bootstrap: BootstrapOptions::default(),
            fit: FitOptions::default(),
            refit: FitOptions {
                max_iters: 200,
                ..FitOptions::default()
            },
        }
    }
}

/// Everything fitted on one data set.
#[derive(Debug, Clone)]
pub struct Analysis {
    /// The runs, grouped by compute budget.
    pub budgets: Vec<Budget>,
    /// Number of runs.
    pub runs: usize,
    /// Approach 1 (lowest-loss run per budget).
    pub approach1: IsoFlopFit,
    /// Approach 2 (parabola vertex per budget).
    pub approach2: IsoFlopFit,
    /// Approach 3 (parametric loss).
    pub approach3: ParametricFit,
    /// Bootstrap intervals, if requested.
    pub intervals: Option<BootstrapIntervals>,
    /// Compute budgets predicted at.
    pub computes: Vec<f64>,
}

/// Fits approaches 1–3 and, if `opts.bootstrap.resamples > 0`, the bootstrap intervals.
pub fn analyze(runs: &[Run], opts: &Options) -> anyhow::Result<Analysis> {
    validate_runs(runs)?;
    let budgets = group_by_budget(runs);
    let a1 = approach1(&budgets).map_err(|e| anyhow::anyhow!("approach 1: {e}"))?;
    let a2 = approach2(&budgets).map_err(|e| anyhow::anyhow!("approach 2: {e}"))?;
    let a3 = fit_parametric(runs, &opts.fit).map_err(|e| anyhow::anyhow!("approach 3: {e}"))?;
    let intervals = (opts.bootstrap.resamples > 0)
        .then(|| bootstrap(runs, &a3.law, &opts.computes, &opts.bootstrap, &opts.refit));
    Ok(Analysis {
        budgets,
        runs: runs.len(),
        approach1: a1,
        approach2: a2,
        approach3: a3,
        intervals,
        computes: opts.computes.clone(),
    })
}

//! Runs all three approaches and the bootstrap on one data set.

use crate::bootstrap::{bootstrap_with_progress, BootstrapIntervals, BootstrapOptions};
use crate::data::{group_by_budget, validate_runs, Budget, Run};
use crate::dedup::{Duplicate, DuplicatePolicy};
use crate::isoflop::{approach1, approach2, IsoFlopFit};
use crate::parametric::{fit_problem, FitOptions, HuberProblem, ParametricFit, POLISHED};
use crate::progress::Stage;

/// Most bootstrap resamples accepted (the replicates are kept in memory to take percentiles).
pub const MAX_RESAMPLES: usize = 100_000;

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
    /// What to do with records that repeat earlier ones (default: drop them).
    pub duplicates: DuplicatePolicy,
    /// Show progress of the long stages on stderr (see [`crate::progress`]).
    pub progress: bool,
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
            duplicates: DuplicatePolicy::default(),
            progress: false,
        }
    }
}

/// Everything fitted on one data set.
#[derive(Debug, Clone)]
pub struct Analysis {
    /// The runs, grouped by compute budget.
    pub budgets: Vec<Budget>,
    /// Number of runs fitted (after dropping duplicates).
    pub runs: usize,
    /// Records repeating earlier ones (dropped unless the policy was to keep them).
    pub duplicates: Vec<Duplicate>,
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
/// Duplicated records are handled by `opts.duplicates` first.
pub fn analyze(runs: &[Run], opts: &Options) -> anyhow::Result<Analysis> {
    if opts.bootstrap.resamples > MAX_RESAMPLES {
        anyhow::bail!(
            "bootstrap resamples must be at most {MAX_RESAMPLES}, got {}",
            opts.bootstrap.resamples
        );
    }
    validate_runs(runs)?;
    let (runs, duplicates) = crate::dedup::apply(runs, opts.duplicates)?;
    let runs = runs.as_slice();
    let budgets = group_by_budget(runs);
    let a1 = approach1(&budgets).map_err(|e| anyhow::anyhow!("approach 1: {e}"))?;
    let a2 = approach2(&budgets).map_err(|e| anyhow::anyhow!("approach 2: {e}"))?;
    let problem = HuberProblem::new(runs, opts.fit.delta);
    let grid = crate::parametric::initial_grid().len();
    let mut starts = opts.fit.starts.clamp(1, grid) as u64;
    if problem.coarse(crate::parametric::COARSE_RUNS).is_some() {
        starts += POLISHED as u64;
    }
    let stage = Stage::new("approach 3 starts", starts, opts.progress);
    let a3 = fit_problem(&problem, &opts.fit, &|| stage.tick());
    stage.finish();
    let a3 = a3.map_err(|e| anyhow::anyhow!("approach 3: {e}; {}", farthest_run(runs)))?;
    let intervals = (opts.bootstrap.resamples > 0).then(|| {
        let stage = Stage::new(
            "bootstrap resamples",
            opts.bootstrap.resamples as u64,
            opts.progress,
        );
        let iv = bootstrap_with_progress(
            runs,
            &a3.law,
            &opts.computes,
            &opts.bootstrap,
            &opts.refit,
            &|| stage.tick(),
        );
        stage.finish();
        iv
    });
    Ok(Analysis {
        budgets,
        runs: runs.len(),
        duplicates,
        approach1: a1,
        approach2: a2,
        approach3: a3,
        intervals,
        computes: opts.computes.clone(),
    })
}

/// Names the run farthest from the median (N, D) in log space, for approach-3 failures:
/// values every check accepts can still be far enough out to wreck the fit.
fn farthest_run(runs: &[Run]) -> String {
    let median = |f: fn(&Run) -> f64| {
        let mut v: Vec<f64> = runs.iter().map(|r| f(r).log10()).collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    let (mn, md) = (median(|r| r.parameters), median(Run::tokens));
    let decades = |r: &Run| {
        let (dn, dd) = (r.parameters.log10() - mn, r.tokens().log10() - md);
        dn.abs().max(dd.abs())
    };
    match runs.iter().max_by(|x, y| decades(x).total_cmp(&decades(y))) {
        Some(r) => format!(
            "the run farthest from the others is {r} (tokens D = {:e}), {:.1} decades from \
             the median N = 1e{mn:.1}, D = 1e{md:.1}",
            r.tokens(),
            decades(r)
        ),
        None => String::from("no runs"),
    }
}

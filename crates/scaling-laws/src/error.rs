//! Errors raised by the fits (as opposed to input parsing, see [`crate::data::DataError`]).

use crate::data::Run;

/// Lists runs as "record i (...)" for error messages.
pub(crate) fn describe_runs(runs: &[Run]) -> String {
    runs.iter()
        .map(Run::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// A fit could not be carried out on the given data.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FitError {
    /// Fewer distinct compute budgets than a power law needs.
    #[error("need at least {needed} distinct compute budgets for a power-law fit, found {found}")]
    TooFewBudgets {
        /// Minimum required.
        needed: usize,
        /// Number present.
        found: usize,
    },
    /// A budget has too few runs (or too few distinct sizes) for a parabola.
    #[error(
        "compute budget {compute:e} has {found} run(s) with distinct sizes, approach 2 needs at least 3: {runs}"
    )]
    TooFewRuns {
        /// Compute budget.
        compute: f64,
        /// Distinct sizes present.
        found: usize,
        /// The runs, described.
        runs: String,
    },
    /// A parabola has no minimum (it opens downwards or is flat).
    #[error("compute budget {compute:e}: the fitted parabola of loss in log N has no minimum (curvature {curvature:e}): {runs}")]
    NoMinimum {
        /// Compute budget.
        compute: f64,
        /// Quadratic coefficient found.
        curvature: f64,
        /// The runs, described.
        runs: String,
    },
    /// A least-squares system is singular (e.g. all x equal).
    #[error("degenerate least-squares problem: {0}")]
    Degenerate(String),
    /// The parametric optimisation failed from every starting point.
    #[error("parametric fit failed: {0}")]
    Optimizer(String),
}

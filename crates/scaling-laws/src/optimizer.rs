//! argmin L-BFGS (More–Thuente line search) applied to a [`HuberProblem`].

use std::cell::{Cell, RefCell};

use argmin::core::{CostFunction, Error as ArgminError, Executor, Gradient, State};
use argmin::solver::linesearch::MoreThuenteLineSearch;
use argmin::solver::quasinewton::LBFGS;

use crate::error::FitError;
use crate::parametric::HuberProblem;

/// A cached (parameters, cost, gradient) triple.
type Evaluation = (Vec<f64>, f64, [f64; 5]);

/// One L-BFGS run's view of a [`HuberProblem`]: computes cost and gradient together and
/// caches them (More–Thuente asks for both at each trial point), rejects non-finite values and
/// caps the number of evaluations, since argmin's inner line search has no iteration limit.
struct Counted<'a> {
    inner: &'a HuberProblem,
    cache: RefCell<Option<Evaluation>>,
    evals: Cell<u64>,
    limit: u64,
}

impl Counted<'_> {
    fn both(&self, p: &[f64]) -> Result<(f64, [f64; 5]), ArgminError> {
        if let Some((q, c, g)) = self.cache.borrow().as_ref() {
            if q.as_slice() == p {
                return Ok((*c, *g));
            }
        }
        let n = self.evals.get() + 1;
        self.evals.set(n);
        if n > self.limit {
            return Err(ArgminError::msg("evaluation budget exhausted"));
        }
        let mut g = [0.0; 5];
        let c = self.inner.eval(p, Some(&mut g));
        if !c.is_finite() || g.iter().any(|v| !v.is_finite()) {
            return Err(ArgminError::msg("non-finite objective"));
        }
        *self.cache.borrow_mut() = Some((p.to_vec(), c, g));
        Ok((c, g))
    }
}

impl CostFunction for Counted<'_> {
    type Param = Vec<f64>;
    type Output = f64;
    fn cost(&self, p: &Self::Param) -> Result<f64, ArgminError> {
        Ok(self.both(p)?.0)
    }
}

impl Gradient for Counted<'_> {
    type Param = Vec<f64>;
    type Gradient = Vec<f64>;
    fn gradient(&self, p: &Self::Param) -> Result<Vec<f64>, ArgminError> {
        Ok(self.both(p)?.1.to_vec())
    }
}

/// Runs L-BFGS from `x0`; returns the final parameters and objective.
pub fn minimize(
    problem: &HuberProblem,
    x0: Vec<f64>,
    max_iters: u64,
) -> Result<(Vec<f64>, f64), FitError> {
    let solver = LBFGS::new(MoreThuenteLineSearch::new(), 10)
        .with_tolerance_grad(1e-12)
        .and_then(|s| s.with_tolerance_cost(0.0))
        .map_err(|e| FitError::Optimizer(e.to_string()))?;
    let counted = Counted {
        inner: problem,
        cache: RefCell::new(None),
        evals: Cell::new(0),
        limit: 20 * max_iters + 100,
    };
    let result = Executor::new(counted, solver)
        .configure(|s| s.param(x0).max_iters(max_iters))
        .run()
        .map_err(|e| FitError::Optimizer(e.to_string()))?;
    let state = result.state();
    let best = state
        .get_best_param()
        .cloned()
        .ok_or_else(|| FitError::Optimizer("L-BFGS returned no parameters".into()))?;
    Ok((best, state.get_best_cost()))
}

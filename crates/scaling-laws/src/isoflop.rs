//! Approaches 1 and 2: per-budget optima, then power laws N_opt = k·C^a and D_opt = m·C^b.

use serde::Serialize;

use crate::data::{Budget, Run};
use crate::error::FitError;
use crate::parabola::{fit_parabola, Parabola};
use crate::powerlaw::{fit_power_law, PowerLaw};

/// The compute-optimal point found for one budget.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Optimum {
    /// Compute budget C.
    pub compute: f64,
    /// Optimal model size.
    pub n_opt: f64,
    /// Optimal token count C / (6 N_opt).
    pub d_opt: f64,
    /// Loss at the optimum (observed for approach 1, parabola vertex for approach 2).
    pub loss: f64,
}

/// Result of approach 1 or 2.
#[derive(Debug, Clone, PartialEq)]
pub struct IsoFlopFit {
    /// One optimum per budget, sorted by compute.
    pub optima: Vec<Optimum>,
    /// Per-budget parabolas (approach 2 only; empty for approach 1).
    pub parabolas: Vec<Parabola>,
    /// N_opt = k · C^a.
    pub n_law: PowerLaw,
    /// D_opt = m · C^b.
    pub d_law: PowerLaw,
}

impl IsoFlopFit {
    /// Predicted (N_opt, D_opt) at compute `c`.
    pub fn predict(&self, c: f64) -> (f64, f64) {
        (self.n_law.eval(c), self.d_law.eval(c))
    }
}

fn fit_laws(optima: Vec<Optimum>, parabolas: Vec<Parabola>) -> Result<IsoFlopFit, FitError> {
    if optima.len() < 2 {
        return Err(FitError::TooFewBudgets {
            needed: 2,
            found: optima.len(),
        });
    }
    let cs: Vec<f64> = optima.iter().map(|o| o.compute).collect();
    let ns: Vec<f64> = optima.iter().map(|o| o.n_opt).collect();
    let ds: Vec<f64> = optima.iter().map(|o| o.d_opt).collect();
    Ok(IsoFlopFit {
        n_law: fit_power_law(&cs, &ns)?,
        d_law: fit_power_law(&cs, &ds)?,
        optima,
        parabolas,
    })
}

/// Approach 1: the run with the lowest final loss at each budget.
pub fn approach1(budgets: &[Budget]) -> Result<IsoFlopFit, FitError> {
    let optima = budgets
        .iter()
        .filter_map(|b| {
            b.runs
                .iter()
                .min_by(|x, y| x.final_loss.total_cmp(&y.final_loss))
                .map(|r: &Run| Optimum {
                    compute: b.compute,
                    n_opt: r.parameters,
                    d_opt: r.tokens(),
                    loss: r.final_loss,
                })
        })
        .collect();
    fit_laws(optima, Vec::new())
}

/// Approach 2: the vertex of a parabola of loss in ln N at each budget.
pub fn approach2(budgets: &[Budget]) -> Result<IsoFlopFit, FitError> {
    let mut optima = Vec::with_capacity(budgets.len());
    let mut parabolas = Vec::with_capacity(budgets.len());
    for b in budgets {
        let p = fit_parabola(b)?;
        let n_opt = p.n_opt();
        optima.push(Optimum {
            compute: b.compute,
            n_opt,
            d_opt: b.compute / (6.0 * n_opt),
            loss: p.min_loss(),
        });
        parabolas.push(p);
    }
    fit_laws(optima, parabolas)
}

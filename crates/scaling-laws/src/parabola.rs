//! Quadratic fits of loss against ln N for one compute budget (approach 2).

use serde::Serialize;

use crate::data::Budget;
use crate::error::{describe_runs, FitError};

/// loss(N) = c0 + c1·u + c2·u², with u = ln N − `center`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Parabola {
    /// Compute budget the parabola belongs to.
    pub compute: f64,
    /// Centre of ln N used for conditioning.
    pub center: f64,
    /// Constant, linear and quadratic coefficients in u.
    pub coefficients: [f64; 3],
}

impl Parabola {
    /// Loss predicted at model size `n`.
    pub fn eval(&self, n: f64) -> f64 {
        let u = n.ln() - self.center;
        let [c0, c1, c2] = self.coefficients;
        c0 + u * (c1 + u * c2)
    }

    /// Model size at the vertex (the minimum).
    pub fn n_opt(&self) -> f64 {
        let [_, c1, c2] = self.coefficients;
        (self.center - c1 / (2.0 * c2)).exp()
    }

    /// Loss at the vertex.
    pub fn min_loss(&self) -> f64 {
        self.eval(self.n_opt())
    }
}

/// Fits a parabola of loss in ln N to a budget's runs; needs ≥ 3 distinct sizes and a minimum.
pub fn fit_parabola(budget: &Budget) -> Result<Parabola, FitError> {
    let runs = &budget.runs;
    let mut sizes: Vec<f64> = runs.iter().map(|r| r.parameters).collect();
    sizes.sort_by(f64::total_cmp);
    sizes.dedup();
    if sizes.len() < 3 {
        return Err(FitError::TooFewRuns {
            compute: budget.compute,
            found: sizes.len(),
            runs: describe_runs(runs),
        });
    }
    let xs: Vec<f64> = runs.iter().map(|r| r.parameters.ln()).collect();
    let center = xs.iter().sum::<f64>() / xs.len() as f64;
    // Normal equations for [1, u, u²].
    let mut m = [[0.0f64; 3]; 3];
    let mut rhs = [0.0f64; 3];
    for (x, run) in xs.iter().zip(runs) {
        let u = x - center;
        let basis = [1.0, u, u * u];
        for i in 0..3 {
            rhs[i] += basis[i] * run.final_loss;
            for j in 0..3 {
                m[i][j] += basis[i] * basis[j];
            }
        }
    }
    let coefficients = solve3(m, rhs).ok_or_else(|| {
        FitError::Degenerate(format!(
            "singular parabola fit at budget {:e}: {}",
            budget.compute,
            describe_runs(runs)
        ))
    })?;
    let curvature = coefficients[2];
    if curvature <= 0.0 || !curvature.is_finite() {
        return Err(FitError::NoMinimum {
            compute: budget.compute,
            curvature,
            runs: describe_runs(runs),
        });
    }
    Ok(Parabola {
        compute: budget.compute,
        center,
        coefficients,
    })
}

/// Solves a 3×3 linear system by Gaussian elimination with partial pivoting.
fn solve3(mut m: [[f64; 3]; 3], mut b: [f64; 3]) -> Option<[f64; 3]> {
    let scale = m.iter().flatten().fold(0.0f64, |s, v| s.max(v.abs()));
    for col in 0..3 {
        let pivot = (col..3).max_by(|&i, &j| m[i][col].abs().total_cmp(&m[j][col].abs()))?;
        if m[pivot][col].abs() <= 1e-12 * scale {
            return None;
        }
        m.swap(col, pivot);
        b.swap(col, pivot);
        let pivot_row = m[col];
        for row in col + 1..3 {
            let f = m[row][col] / pivot_row[col];
            for (dst, src) in m[row].iter_mut().zip(pivot_row).skip(col) {
                *dst -= f * src;
            }
            b[row] -= f * b[col];
        }
    }
    let mut x = [0.0; 3];
    for row in (0..3).rev() {
        let s: f64 = (row + 1..3).map(|k| m[row][k] * x[k]).sum();
        x[row] = (b[row] - s) / m[row][row];
    }
    Some(x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Run;

    fn budget(points: &[(f64, f64)]) -> Budget {
        let runs = points
            .iter()
            .enumerate()
            .map(|(index, &(n, l))| Run {
                index,
                parameters: n,
                compute_budget: 1e20,
                final_loss: l,
            })
            .collect();
        Budget {
            compute: 1e20,
            runs,
        }
    }

    #[test]
    fn vertex_of_exact_parabola() {
        let pts: Vec<(f64, f64)> = (0..7)
            .map(|i| {
                let n = 1e8 * 2f64.powi(i);
                (n, 3.0 + 0.1 * (n.ln() - 1e9f64.ln()).powi(2))
            })
            .collect();
        let p = fit_parabola(&budget(&pts)).expect("fit");
        assert!((p.n_opt() / 1e9 - 1.0).abs() < 1e-8);
        assert!((p.min_loss() - 3.0).abs() < 1e-10);
    }

    #[test]
    fn concave_profile_is_rejected() {
        let pts = [(1e8, 3.0), (1e9, 3.5), (1e10, 3.0)];
        let err = fit_parabola(&budget(&pts)).expect_err("no minimum");
        assert!(err.to_string().contains("record 1"), "{err}");
    }
}

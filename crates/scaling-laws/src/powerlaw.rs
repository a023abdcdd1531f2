//! Power laws y = k · x^a fitted by least squares in log space.

use serde::Serialize;

use crate::error::FitError;

/// A fitted power law y = `coefficient` · x^`exponent`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PowerLaw {
    /// k.
    pub coefficient: f64,
    /// a.
    pub exponent: f64,
    /// Coefficient of determination of the fit of ln y on ln x.
    pub r2: f64,
}

impl PowerLaw {
    /// Evaluates k · x^a.
    pub fn eval(&self, x: f64) -> f64 {
        self.coefficient * x.powf(self.exponent)
    }
}

/// Fits ln y = ln k + a ln x by ordinary least squares. Inputs must be positive.
pub fn fit_power_law(xs: &[f64], ys: &[f64]) -> Result<PowerLaw, FitError> {
    if xs.len() != ys.len() {
        return Err(FitError::Degenerate(format!(
            "{} x values but {} y values",
            xs.len(),
            ys.len()
        )));
    }
    let lx: Vec<f64> = xs.iter().map(|x| x.ln()).collect();
    let ly: Vec<f64> = ys.iter().map(|y| y.ln()).collect();
    let (slope, intercept, r2) = linear_regression(&lx, &ly)?;
    Ok(PowerLaw {
        coefficient: intercept.exp(),
        exponent: slope,
        r2,
    })
}

/// Ordinary least squares y = intercept + slope · x; returns (slope, intercept, R²).
pub fn linear_regression(x: &[f64], y: &[f64]) -> Result<(f64, f64, f64), FitError> {
    let n = x.len();
    if n < 2 {
        return Err(FitError::TooFewBudgets {
            needed: 2,
            found: n,
        });
    }
    let mx = x.iter().sum::<f64>() / n as f64;
    let my = y.iter().sum::<f64>() / n as f64;
    let sxx: f64 = x.iter().map(|v| (v - mx).powi(2)).sum();
    let sxy: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let syy: f64 = y.iter().map(|v| (v - my).powi(2)).sum();
    if sxx <= 0.0 || !sxx.is_finite() {
        return Err(FitError::Degenerate(
            "all x values are equal (need at least 2 distinct compute budgets)".into(),
        ));
    }
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    let sse: f64 = x
        .iter()
        .zip(y)
        .map(|(a, b)| (b - intercept - slope * a).powi(2))
        .sum();
    let r2 = if syy > 0.0 { 1.0 - sse / syy } else { 1.0 };
    Ok((slope, intercept, r2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_power_law_is_recovered() {
        let xs: Vec<f64> = (0..6).map(|i| 10f64.powi(18 + i)).collect();
        let ys: Vec<f64> = xs.iter().map(|x| 0.3 * x.powf(0.45)).collect();
        let law = fit_power_law(&xs, &ys).expect("fit");
        assert!((law.exponent - 0.45).abs() < 1e-10);
        assert!((law.coefficient / 0.3 - 1.0).abs() < 1e-8);
        assert!((law.r2 - 1.0).abs() < 1e-12);
    }

    #[test]
    fn single_point_is_an_error() {
        assert!(fit_power_law(&[1.0], &[2.0]).is_err());
    }
}

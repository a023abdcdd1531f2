//! The machine-readable report (`--json`) and the human table.

use std::fmt::Write as _;

use serde::Serialize;

use crate::bootstrap::{Interval, ParametricIntervals, PowerLawIntervals};
use crate::isoflop::{IsoFlopFit, Optimum};
use crate::pipeline::Analysis;

/// Predicted compute-optimal allocation at one budget.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Prediction {
    /// Compute budget C.
    pub compute: f64,
    /// Optimal model size.
    pub n_opt: f64,
    /// Optimal token count.
    pub d_opt: f64,
}

/// R² in log space of both power laws.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct R2 {
    /// Of ln N_opt on ln C.
    pub n: f64,
    /// Of ln D_opt on ln C.
    pub d: f64,
}

/// Approach 1 or 2 in the JSON report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PowerLawReport {
    /// k in N_opt = k·C^a.
    pub n_coefficient: f64,
    /// a.
    pub n_exponent: f64,
    /// m in D_opt = m·C^b.
    pub d_coefficient: f64,
    /// b.
    pub d_exponent: f64,
    /// Predictions.
    pub predictions: Vec<Prediction>,
    /// Goodness of fit.
    pub r2: R2,
    /// Per-budget optima the laws were fitted to.
    pub optima: Vec<Optimum>,
    /// 95% bootstrap intervals.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intervals: Option<PowerLawIntervals>,
}

/// Approach 3 in the JSON report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParametricReport {
    /// The fitted law: E, A, B, alpha, beta at the top level of the JSON object.
    #[serde(flatten)]
    pub law: crate::parametric::ParametricLaw,
    /// Predictions from the closed-form optimum.
    pub predictions: Vec<Prediction>,
    /// Huber objective (sum over runs, δ = 1e-3) at the optimum.
    pub huber_loss: f64,
    /// RMSE of ln L.
    pub rmse_log_loss: f64,
    /// 95% bootstrap intervals.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intervals: Option<ParametricIntervals>,
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Approach 1.
    pub approach1: PowerLawReport,
    /// Approach 2.
    pub approach2: PowerLawReport,
    /// Approach 3.
    pub approach3: ParametricReport,
    /// Records repeating earlier ones: dropped before fitting unless the duplicate policy was
    /// to keep them (absent when there are none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub duplicates: Vec<crate::dedup::Duplicate>,
}

fn power_report(
    fit: &IsoFlopFit,
    computes: &[f64],
    iv: Option<PowerLawIntervals>,
) -> PowerLawReport {
    PowerLawReport {
        n_coefficient: fit.n_law.coefficient,
        n_exponent: fit.n_law.exponent,
        d_coefficient: fit.d_law.coefficient,
        d_exponent: fit.d_law.exponent,
        predictions: computes
            .iter()
            .map(|&c| {
                let (n_opt, d_opt) = fit.predict(c);
                Prediction {
                    compute: c,
                    n_opt,
                    d_opt,
                }
            })
            .collect(),
        r2: R2 {
            n: fit.n_law.r2,
            d: fit.d_law.r2,
        },
        optima: fit.optima.clone(),
        intervals: iv,
    }
}

/// Builds the report from an analysis.
pub fn build_report(an: &Analysis) -> Report {
    let iv = an.intervals.clone();
    let (i1, i2, i3) = match iv {
        Some(b) => (b.approach1, b.approach2, b.approach3),
        None => (None, None, None),
    };
    let law = an.approach3.law;
    Report {
        approach1: power_report(&an.approach1, &an.computes, i1),
        approach2: power_report(&an.approach2, &an.computes, i2),
        approach3: ParametricReport {
            law,
            predictions: an
                .computes
                .iter()
                .map(|&c| Prediction {
                    compute: c,
                    n_opt: law.n_opt(c),
                    d_opt: law.d_opt(c),
                })
                .collect(),
            huber_loss: an.approach3.huber,
            rmse_log_loss: an.approach3.rmse_log,
            intervals: i3,
        },
        duplicates: an.duplicates.clone(),
    }
}

fn ci(iv: Option<Interval>, sci: bool) -> String {
    match iv {
        Some(i) if sci => format!("[{:.3e}, {:.3e}]", i.lo, i.hi),
        Some(i) => format!("[{:.4}, {:.4}]", i.lo, i.hi),
        None => String::new(),
    }
}

fn power_rows(out: &mut String, name: &str, r: &PowerLawReport) {
    let iv = r.intervals.as_ref();
    let _ = writeln!(
        out,
        "{name}\n  N_opt = {:.4e} · C^{:.4}   a 95% CI {:<18}  R²(log) = {:.5}",
        r.n_coefficient,
        r.n_exponent,
        ci(iv.map(|i| i.n_exponent), false),
        r.r2.n
    );
    let _ = writeln!(
        out,
        "  D_opt = {:.4e} · C^{:.4}   b 95% CI {:<18}  R²(log) = {:.5}",
        r.d_coefficient,
        r.d_exponent,
        ci(iv.map(|i| i.d_exponent), false),
        r.r2.d
    );
    prediction_rows(out, &r.predictions, iv.map(|i| i.predictions.as_slice()));
}

/// One line per compute budget: N_opt and D_opt with their intervals.
fn prediction_rows(
    out: &mut String,
    preds: &[Prediction],
    ivs: Option<&[crate::bootstrap::PredictionInterval]>,
) {
    for (k, p) in preds.iter().enumerate() {
        let pi = ivs.and_then(|i| i.get(k));
        let _ = writeln!(
            out,
            "  C = {:.0e}: N_opt = {:.3e} {:<24}  D_opt = {:.3e} {}",
            p.compute,
            p.n_opt,
            ci(pi.map(|x| x.n_opt), true),
            p.d_opt,
            ci(pi.map(|x| x.d_opt), true)
        );
    }
}

/// Renders the human-readable table.
pub fn render_table(r: &Report, runs: usize, budgets: usize) -> String {
    let mut out = String::new();
    let resamples = r.approach3.intervals.as_ref().map_or(0, |i| i.resamples);
    let _ = writeln!(
        out,
        "Compute-optimal scaling fits: {runs} runs, {budgets} compute budgets, D = C/(6N)"
    );
    if resamples > 0 {
        let _ = writeln!(
            out,
            "(95% percentile bootstrap intervals, stratified resampling)"
        );
    }
    let _ = writeln!(out);
    power_rows(
        &mut out,
        "Approach 1: lowest-loss run per budget",
        &r.approach1,
    );
    let _ = writeln!(out);
    power_rows(
        &mut out,
        "Approach 2: IsoFLOP parabola vertex per budget",
        &r.approach2,
    );
    let _ = writeln!(out);
    let a3 = &r.approach3;
    let iv = a3.intervals.as_ref();
    let _ = writeln!(
        out,
        "Approach 3: L(N, D) = E + A/N^alpha + B/D^beta (Huber on log L)"
    );
    let rows = [
        ("E", a3.law.e, iv.map(|i| i.e)),
        ("A", a3.law.a, iv.map(|i| i.a)),
        ("B", a3.law.b, iv.map(|i| i.b)),
        ("alpha", a3.law.alpha, iv.map(|i| i.alpha)),
        ("beta", a3.law.beta, iv.map(|i| i.beta)),
    ];
    for (name, v, i) in rows {
        let _ = writeln!(out, "  {name:<5} = {v:<12.5} {}", ci(i, false));
    }
    let s = a3.law.alpha + a3.law.beta;
    let _ = writeln!(
        out,
        "  => a = beta/(alpha+beta) = {:.4}, b = alpha/(alpha+beta) = {:.4}",
        a3.law.beta / s,
        a3.law.alpha / s
    );
    let _ = writeln!(
        out,
        "  Huber objective = {:.4e}, RMSE(log L) = {:.4e}",
        a3.huber_loss, a3.rmse_log_loss
    );
    prediction_rows(
        &mut out,
        &a3.predictions,
        iv.map(|i| i.predictions.as_slice()),
    );
    out.lines().map(|l| format!("{}\n", l.trim_end())).collect()
}

//! Each approach recovers the exponents of a known law from synthetic IsoFLOP data.

use scaling_laws::data::group_by_budget;
use scaling_laws::isoflop::{approach1, approach2};
use scaling_laws::parametric::{fit_parametric, FitOptions};
use scaling_laws::synthetic::{isoflop_sweeps, log_budgets, CHINCHILLA};

fn rel(x: f64, truth: f64) -> f64 {
    (x / truth - 1.0).abs()
}

fn truth() -> (f64, f64) {
    let s = CHINCHILLA.alpha + CHINCHILLA.beta;
    (CHINCHILLA.beta / s, CHINCHILLA.alpha / s)
}

#[test]
fn approach1_recovers_exponents() {
    let runs = isoflop_sweeps(&CHINCHILLA, &log_budgets(18.0, 24.0, 0.4), 81, 1.0);
    let fit = approach1(&group_by_budget(&runs)).expect("approach 1");
    let (a, b) = truth();
    eprintln!(
        "approach1 a={} b={}",
        fit.n_law.exponent, fit.d_law.exponent
    );
    assert!(
        rel(fit.n_law.exponent, a) < 0.01,
        "a = {}",
        fit.n_law.exponent
    );
    assert!(
        rel(fit.d_law.exponent, b) < 0.01,
        "b = {}",
        fit.d_law.exponent
    );
}

#[test]
fn approach2_recovers_exponents() {
    let runs = isoflop_sweeps(&CHINCHILLA, &log_budgets(18.0, 24.0, 0.5), 15, 0.5);
    let fit = approach2(&group_by_budget(&runs)).expect("approach 2");
    let (a, b) = truth();
    eprintln!(
        "approach2 a={} b={}",
        fit.n_law.exponent, fit.d_law.exponent
    );
    assert!(
        rel(fit.n_law.exponent, a) < 0.01,
        "a = {}",
        fit.n_law.exponent
    );
    assert!(
        rel(fit.d_law.exponent, b) < 0.01,
        "b = {}",
        fit.d_law.exponent
    );
}

#[test]
fn approach3_recovers_exponents() {
    let runs = isoflop_sweeps(&CHINCHILLA, &log_budgets(18.0, 22.0, 0.5), 9, 0.75);
    let fit = fit_parametric(&runs, &FitOptions::default()).expect("approach 3");
    eprintln!("approach3 {:?}", fit);
    assert!(rel(fit.law.alpha, CHINCHILLA.alpha) < 0.01, "{:?}", fit.law);
    assert!(rel(fit.law.beta, CHINCHILLA.beta) < 0.01, "{:?}", fit.law);
    assert!(rel(fit.law.e, CHINCHILLA.e) < 0.01, "{:?}", fit.law);
}

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

/// Both fitted exponents (N_opt ∝ C^a, D_opt ∝ C^b) within 1 % of the truth.
fn assert_exponents(approach: &str, a_fit: f64, b_fit: f64) {
    let (a, b) = truth();
    eprintln!("{approach} a={a_fit} b={b_fit}");
    assert!(rel(a_fit, a) < 0.01, "{approach}: a = {a_fit}, truth {a}");
    assert!(rel(b_fit, b) < 0.01, "{approach}: b = {b_fit}, truth {b}");
}

#[test]
fn approach1_recovers_exponents() {
    let runs = isoflop_sweeps(&CHINCHILLA, &log_budgets(18.0, 24.0, 0.4), 81, 1.0);
    let fit = approach1(&group_by_budget(&runs)).expect("approach 1");
    assert_exponents("approach1", fit.n_law.exponent, fit.d_law.exponent);
}

#[test]
fn approach2_recovers_exponents() {
    let runs = isoflop_sweeps(&CHINCHILLA, &log_budgets(18.0, 24.0, 0.5), 15, 0.5);
    let fit = approach2(&group_by_budget(&runs)).expect("approach 2");
    assert_exponents("approach2", fit.n_law.exponent, fit.d_law.exponent);
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

#[test]
fn full_pipeline_on_noisy_data_is_sane() {
    use scaling_laws::pipeline::{analyze, Options};
    use scaling_laws::synthetic::with_log_noise;
    let clean = isoflop_sweeps(&CHINCHILLA, &log_budgets(18.0, 22.0, 0.5), 8, 0.75);
    let runs = with_log_noise(&clean, 0.01, 7);
    let mut opts = Options::default();
    opts.bootstrap.resamples = 40;
    let an = analyze(&runs, &opts).expect("analysis");
    let law = an.approach3.law;
    assert!(rel(law.alpha, CHINCHILLA.alpha) < 0.15, "{law:?}");
    assert!(rel(law.beta, CHINCHILLA.beta) < 0.15, "{law:?}");
    let iv = an.intervals.expect("bootstrap ran");
    let a3 = iv.approach3.expect("approach 3 intervals");
    assert!(a3.resamples >= 35, "{} resamples succeeded", a3.resamples);
    assert!(
        a3.alpha.lo <= law.alpha && law.alpha <= a3.alpha.hi,
        "{:?}",
        a3.alpha
    );
    let a2 = iv.approach2.expect("approach 2 intervals");
    let (a, _) = truth();
    assert!(a2.n_exponent.lo < a2.n_exponent.hi && rel(an.approach2.n_law.exponent, a) < 0.1);
}

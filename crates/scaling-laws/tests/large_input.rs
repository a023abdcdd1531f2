//! A large input (the reference sweep, each run 900 times with 1e-6 jitter on the loss: the
//! 64,800 runs of the bar) is fitted quickly, and the weighted objective the bootstrap uses equals the repeated runs.

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use scaling_laws::data::{load_runs, Run};
use scaling_laws::parametric::{HuberProblem, ParametricLaw, HUBER_DELTA};
use scaling_laws::pipeline::{analyze, Options};
use scaling_laws::synthetic::jittered_copies;

fn reference() -> Vec<Run> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/isoflops_curves.json");
    load_runs(&path).expect("shipped data")
}

#[test]
fn large_jittered_input_is_fitted_quickly() {
    let runs = jittered_copies(&reference(), 900, 1e-6, 1);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut opts = Options::default();
        opts.bootstrap.resamples = 20;
        let _ = tx.send(analyze(&runs, &opts).map_err(|e| e.to_string()));
    });
    // The grid's 256 L-BFGS starts over every run took 19 s on 7,200 runs (release).
    let an = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("64,800 runs fitted within 20 s")
        .expect("fit");
    assert_eq!((an.runs, an.duplicates.len()), (64800, 0));
    let law = an.approach3.law;
    let truth = [(law.e, 2.69), (law.alpha, 0.34), (law.beta, 0.36)];
    for (got, want) in truth {
        assert!((got / want - 1.0).abs() < 1e-4, "{law:?}");
    }
    let iv = an
        .intervals
        .expect("bootstrap")
        .approach3
        .expect("approach 3");
    assert_eq!(iv.resamples, 20);
    assert!(
        iv.alpha.lo <= law.alpha && law.alpha <= iv.alpha.hi,
        "{iv:?}"
    );
}

#[test]
fn weighted_problem_equals_repeated_runs() {
    // Two copies of each run with slightly different losses, then weights 0..=3 per run.
    let base = jittered_copies(&reference(), 2, 1e-5, 5);
    let counts: Vec<u32> = (0..base.len() as u32).map(|i| (i * 7) % 4).collect();
    let repeated: Vec<Run> = base
        .iter()
        .zip(&counts)
        .flat_map(|(r, &c)| std::iter::repeat_n(*r, c as usize))
        .collect();
    let weighted = HuberProblem::new(&base, HUBER_DELTA).reweighted(&counts);
    let plain = HuberProblem::new(&repeated, HUBER_DELTA);
    let near = ParametricLaw {
        e: 2.69,
        a: 1606.4,
        b: 3210.7,
        alpha: 0.34,
        beta: 0.36,
    };
    let far = ParametricLaw {
        e: 2.0,
        a: 400.0,
        b: 400.0,
        alpha: 0.3,
        beta: 0.3,
    };
    // Near the optimum most residuals are inside δ (closed form per point), far from it
    // none are (run by run).
    for law in [near, far] {
        let (mut g1, mut g2) = ([0.0; 5], [0.0; 5]);
        let p = weighted.to_params(&law);
        let f1 = weighted.eval(&p, Some(&mut g1));
        let f2 = plain.eval(&plain.to_params(&law), Some(&mut g2));
        assert!((f1 / f2 - 1.0).abs() < 1e-9, "{f1} vs {f2}");
        // And both equal the objective written out run by run.
        let direct: f64 = repeated
            .iter()
            .map(|r| {
                let res = law.loss(r.parameters, r.tokens()).ln() - r.final_loss.ln();
                if res.abs() <= HUBER_DELTA {
                    0.5 * res * res
                } else {
                    HUBER_DELTA * (res.abs() - 0.5 * HUBER_DELTA)
                }
            })
            .sum();
        assert!((f1 / direct - 1.0).abs() < 1e-6, "{f1} vs {direct}");
        // The centring differs (means over other runs), which changes only ∂/∂α and ∂/∂β.
        for k in 0..3 {
            let (a, b) = (g1[k], g2[k]);
            assert!((a - b).abs() <= 1e-8 * (1.0 + b.abs()), "{g1:?} vs {g2:?}");
        }
        for k in 0..5 {
            let h = 1e-6;
            let (mut hi, mut lo) = (p.clone(), p.clone());
            hi[k] += h;
            lo[k] -= h;
            let fd = (weighted.eval(&hi, None) - weighted.eval(&lo, None)) / (2.0 * h);
            assert!(
                (fd - g1[k]).abs() < 1e-5 * (1.0 + fd.abs()),
                "{k}: {fd} vs {g1:?}"
            );
        }
    }
}

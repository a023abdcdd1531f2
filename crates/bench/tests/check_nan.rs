//! The weight comparisons that bench ddp-check and bench zero1-check share: a NaN or an
//! infinity on either side fails them, bad tolerances are refused, and ddp-check's own
//! flags (tolerances, --ranks, the bf16 default tolerance) behave.

use candle_core::{Device, Tensor};
use ddp::check::{max_abs_diff, max_abs_diff_host, validate_tolerances, worst_ratio};
use std::process::Command;

fn t(v: &[f32]) -> Tensor {
    Tensor::new(v, &Device::Cpu).unwrap()
}

#[test]
fn a_planted_nan_or_inf_on_either_side_fails_the_comparison() {
    let good = t(&[1.0, -2.0, 3.0, 0.5]);
    assert_eq!(max_abs_diff(&good, &good).unwrap(), 0.0);
    assert_eq!(worst_ratio(&good, &good, 1e-5, 1.3e-6).unwrap(), 0.0);
    for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        let planted = t(&[1.0, -2.0, bad, 0.5]);
        for (a, b) in [(&planted, &good), (&good, &planted), (&planted, &planted)] {
            let d = max_abs_diff(a, b).unwrap();
            let r = worst_ratio(a, b, 1e-5, 1.3e-6).unwrap();
            assert_eq!(d, f32::INFINITY, "{bad} planted: max_abs_diff");
            assert_eq!(r, f32::INFINITY, "{bad} planted: worst_ratio");
        }
    }
}

/// The host weights' comparison the dp-tests and train's tests use: the same rule, per
/// parameter, and a mismatch in shape is an error, not a shorter comparison.
#[test]
fn host_weights_compare_by_the_same_rule() {
    let good = vec![vec![1.0, -2.0], vec![], vec![3.0]];
    assert_eq!(max_abs_diff_host(&good, &good).unwrap(), 0.0);
    let off = vec![vec![1.0, -2.5], vec![], vec![3.25]];
    assert_eq!(max_abs_diff_host(&good, &off).unwrap(), 0.5);
    for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        let planted = vec![vec![1.0, -2.0], vec![], vec![bad]];
        for (a, b) in [(&planted, &good), (&good, &planted)] {
            assert_eq!(max_abs_diff_host(a, b).unwrap(), f32::INFINITY, "{bad}");
        }
    }
    assert!(max_abs_diff_host(&good, &good[..2]).is_err());
    let short = vec![vec![1.0], vec![], vec![3.0]];
    assert!(max_abs_diff_host(&good, &short).is_err());
}

#[test]
fn tolerances_must_be_finite_and_non_negative() {
    let a = t(&[1.0, 2.0]);
    for (tol, rtol) in [
        (-1e-5, 0.0),
        (f32::NAN, 0.0),
        (1e-5, f32::INFINITY),
        (0.0, -1.0),
    ] {
        let e = worst_ratio(&a, &a, tol, rtol).unwrap_err().to_string();
        assert!(e.contains("tol"), "{e}");
        let e = validate_tolerances(tol, rtol, "--tol", "--rtol").unwrap_err();
        assert!(e.to_string().contains("--"), "{e}");
    }
    // Both zero: exact equality, never 0/0.
    assert_eq!(worst_ratio(&a, &a, 0.0, 0.0).unwrap(), 0.0);
    assert!(worst_ratio(&a, &t(&[1.0, 2.0001]), 0.0, 0.0).unwrap() > 1.0);
}

fn ddp_check(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_bench"))
        .arg("ddp-check")
        .args(args)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn ddp_check_refuses_bad_tolerances_and_ranks_naming_the_flag() {
    for (args, flag) in [
        (&["--tol=-1"][..], "--tol"),
        (&["--tol", "NaN"][..], "--tol"),
        (&["--rtol", "inf"][..], "--rtol"),
        (&["--ranks", "100000"][..], "--ranks"),
        (&["--ranks", "0"][..], "--ranks"),
    ] {
        let (ok, text) = ddp_check(args);
        assert!(!ok, "{args:?} succeeded: {text}");
        assert!(text.contains(flag), "{args:?}: {text}");
        assert!(!text.contains("panicked"), "{args:?}: {text}");
    }
}

#[test]
fn bf16_gradients_pass_the_check_at_their_default_tolerance() {
    let (ok, text) = ddp_check(&["--model", "toy", "--bf16-grads", "--steps", "3"]);
    assert!(ok, "{text}");
    assert!(text.contains("5e-3") && text.contains("OK"), "{text}");
}

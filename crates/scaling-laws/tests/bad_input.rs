//! Every kind of bad input gives an error that names the offending record; nothing panics.

use scaling_laws::data::{group_by_budget, parse_runs, validate_runs, DataError, Run};
use scaling_laws::isoflop::approach2;

fn parse_err(text: &str) -> String {
    match parse_runs(text) {
        Ok(runs) => panic!("expected an error, parsed {runs:?}"),
        Err(e) => e.to_string(),
    }
}

const GOOD: &str = r#"{"parameters": 1e8, "compute_budget": 1e19, "final_loss": 3.5}"#;

#[test]
fn missing_field_names_the_record() {
    let text = format!(r#"[{GOOD}, {{"parameters": 2e8, "compute_budget": 1e19}}]"#);
    let msg = parse_err(&text);
    assert!(msg.contains("record 1"), "{msg}");
    assert!(msg.contains("final_loss"), "{msg}");
    assert!(msg.contains("200000000"), "{msg}");
}

#[test]
fn non_numeric_field_names_the_record() {
    let text = format!(
        r#"[{GOOD}, {GOOD}, {{"parameters": "big", "compute_budget": 1e19, "final_loss": 3.0}}]"#
    );
    let msg = parse_err(&text);
    assert!(msg.contains("record 2"), "{msg}");
    assert!(msg.contains("parameters") && msg.contains("big"), "{msg}");
}

#[test]
fn non_positive_value_names_the_record() {
    let text =
        format!(r#"[{GOOD}, {{"parameters": -5, "compute_budget": 1e19, "final_loss": 3.0}}]"#);
    let msg = parse_err(&text);
    assert!(msg.contains("record 1 (parameters=-5"), "{msg}");
    assert!(
        msg.contains("`parameters` must be finite and > 0, got -5"),
        "{msg}"
    );

    let text =
        format!(r#"[{GOOD}, {{"parameters": 3e8, "compute_budget": 0, "final_loss": 3.0}}]"#);
    let msg = parse_err(&text);
    assert!(
        msg.contains("record 1") && msg.contains("compute_budget"),
        "{msg}"
    );
}

#[test]
fn non_finite_value_names_the_record() {
    // Bare NaN / Infinity as written by Python's json module.
    let text = format!(
        r#"[{GOOD}, {GOOD}, {{"parameters": 1e9, "compute_budget": 1e19, "final_loss": NaN}}]"#
    );
    let msg = parse_err(&text);
    assert!(
        msg.contains("record 2") && msg.contains("final_loss") && msg.contains("NaN"),
        "{msg}"
    );

    let text =
        format!(r#"[{{"parameters": Infinity, "compute_budget": 1e19, "final_loss": 3}}, {GOOD}]"#);
    let msg = parse_err(&text);
    assert!(msg.contains("record 0") && msg.contains("got inf"), "{msg}");

    // Runs built in code are validated too.
    let run = Run {
        index: 7,
        parameters: 1e9,
        compute_budget: f64::INFINITY,
        final_loss: 3.0,
    };
    let msg = validate_runs(&[run]).expect_err("inf").to_string();
    assert!(
        msg.contains("record 7") && msg.contains("compute_budget"),
        "{msg}"
    );
}

#[test]
fn empty_input_is_rejected() {
    assert!(matches!(parse_runs(""), Err(DataError::Empty)));
    assert!(matches!(parse_runs("  \n"), Err(DataError::Empty)));
    assert!(matches!(parse_runs("[]"), Err(DataError::Empty)));
    assert!(parse_err("{}").contains("expected a JSON array"));
    assert!(parse_err("[1, 2").contains("invalid JSON"));
}

#[test]
fn budget_with_fewer_than_three_runs_names_its_records() {
    let mut records: Vec<String> = (0..4)
        .map(|i| {
            format!(
                r#"{{"parameters": {}, "compute_budget": 1e19, "final_loss": {}}}"#,
                1e8 * 2f64.powi(i),
                3.0 + 0.1 * (i as f64 - 1.5).powi(2)
            )
        })
        .collect();
    records.push(r#"{"parameters": 4e8, "compute_budget": 1e20, "final_loss": 3.1}"#.into());
    records.push(r#"{"parameters": 8e8, "compute_budget": 1e20, "final_loss": 3.0}"#.into());
    let runs = parse_runs(&format!("[{}]", records.join(","))).expect("valid records");
    let msg = approach2(&group_by_budget(&runs))
        .expect_err("too few runs")
        .to_string();
    assert!(msg.contains("1e20") && msg.contains("at least 3"), "{msg}");
    assert!(msg.contains("record 4 (parameters=400000000"), "{msg}");
    assert!(msg.contains("record 5 (parameters=800000000"), "{msg}");
}

#[test]
fn values_that_cannot_be_fitted_name_the_record() {
    // 6N overflows: D = C/(6N) would be 0 and ln D infinite (approach 3 used to fail
    // without naming any record).
    let text =
        format!(r#"[{GOOD}, {{"parameters": 1e308, "compute_budget": 1e19, "final_loss": 3.0}}]"#);
    let msg = parse_err(&text);
    assert!(msg.contains("record 1 (parameters=1000000"), "{msg}");
    assert!(msg.contains("6N = inf overflows"), "{msg}");

    // D underflows to 0, or overflows to infinity.
    for (n, c) in [("1e300", "1e-30"), ("1e-300", "1e300")] {
        let text = format!(
            r#"[{GOOD}, {GOOD}, {{"parameters": {n}, "compute_budget": {c}, "final_loss": 3.0}}]"#
        );
        let msg = parse_err(&text);
        assert!(
            msg.contains("record 2") && msg.contains("tokens D = C/(6N)"),
            "{msg}"
        );
    }
}

#[test]
fn approach3_failure_names_the_outlying_record() {
    // Accepted by every check (6N and D finite), but 299 decades out: approach 3 fails, and
    // its error names the record instead of only "no start converged".
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../data/isoflops_curves.json");
    let mut runs = scaling_laws::data::load_runs(&path).expect("shipped data");
    runs.push(Run {
        index: 72,
        parameters: 2e307,
        compute_budget: 6e18,
        final_loss: 3.0,
    });
    let mut opts = scaling_laws::pipeline::Options::default();
    opts.bootstrap.resamples = 0;
    let msg = scaling_laws::pipeline::analyze(&runs, &opts)
        .expect_err("approach 3 fails")
        .to_string();
    assert!(msg.contains("approach 3"), "{msg}");
    assert!(
        msg.contains("farthest from the others is record 72 (parameters=2000"),
        "{msg}"
    );
}

//! Duplicated records are found, named and dropped (or refused), so that they cannot narrow
//! the bootstrap intervals; distinct runs that differ only slightly are kept.

use std::path::PathBuf;

use scaling_laws::data::{load_runs, parse_runs, Run};
use scaling_laws::dedup::{find_duplicates, DuplicatePolicy};
use scaling_laws::pipeline::{analyze, Options};
use scaling_laws::synthetic::jittered_copies;

fn reference() -> Vec<Run> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/isoflops_curves.json");
    load_runs(&path).expect("shipped data")
}

fn opts(policy: DuplicatePolicy) -> Options {
    let mut o = Options {
        duplicates: policy,
        ..Options::default()
    };
    o.bootstrap.resamples = 30;
    o
}

/// The reference sweep followed by a second copy of every record (records 72..143).
fn doubled() -> Vec<Run> {
    let runs = reference();
    let n = runs.len();
    let copies = runs.iter().map(|r| Run {
        index: r.index + n,
        ..*r
    });
    runs.iter().copied().chain(copies).collect()
}

#[test]
fn duplicated_records_are_dropped_and_do_not_narrow_the_intervals() {
    let base = analyze(&reference(), &opts(DuplicatePolicy::Drop)).expect("reference fit");
    let twice = analyze(&doubled(), &opts(DuplicatePolicy::Drop)).expect("doubled fit");
    assert_eq!(twice.runs, 72);
    assert_eq!(twice.duplicates.len(), 72);
    let first = twice.duplicates[0];
    assert_eq!((first.record, first.same_as, first.exact), (72, 0, true));
    assert!(
        first
            .to_string()
            .starts_with("record 72 (parameters=49999999"),
        "{first}"
    );
    assert_eq!(twice.intervals, base.intervals);
    assert_eq!(twice.approach2, base.approach2);

    // Kept on request: then (and only then) the copies count as runs.
    let kept = analyze(&doubled(), &opts(DuplicatePolicy::Keep)).expect("kept fit");
    assert_eq!((kept.runs, kept.duplicates.len()), (144, 72));
    assert_ne!(kept.intervals, base.intervals);
}

#[test]
fn refusing_duplicates_names_them() {
    let err = analyze(&doubled(), &opts(DuplicatePolicy::Refuse))
        .expect_err("refused")
        .to_string();
    assert!(err.contains("72 record(s) repeat earlier ones"), "{err}");
    assert!(err.contains("record 72 (parameters=49999999"), "{err}");
    assert!(err.contains("repeats record 0"), "{err}");
    assert!(err.contains("... and 52 more"), "{err}");
}

#[test]
fn equal_values_are_duplicates_however_written_and_distinct_losses_are_not() {
    let text = r#"[
        {"parameters": 1e8, "compute_budget": 1e19, "final_loss": 3.5},
        {"parameters": 2e8, "compute_budget": 1e19, "final_loss": 3.4},
        {"parameters": 100000000.0, "compute_budget": 10000000000000000000, "final_loss": 3.50},
        {"parameters": 2e8, "compute_budget": 1.0000000000001e19, "final_loss": 3.4},
        {"parameters": 2e8, "compute_budget": 1e19, "final_loss": 3.4000001}
    ]"#;
    let dups = find_duplicates(&parse_runs(text).expect("valid"));
    let found: Vec<(usize, usize, bool)> = dups
        .iter()
        .map(|d| (d.record, d.same_as, d.exact))
        .collect();
    // Record 3's budget is within the 1e-9 that makes budgets one; record 4's loss differs.
    assert_eq!(found, [(2, 0, true), (3, 1, false)]);
    assert!(dups[1].to_string().contains("within 1e-9"), "{}", dups[1]);

    // Repeats with a loss jittered by 1e-6 relative are distinct runs.
    let jittered = jittered_copies(&reference(), 50, 1e-6, 1);
    assert_eq!(jittered.len(), 3600);
    assert!(find_duplicates(&jittered).is_empty());
}

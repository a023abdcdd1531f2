//! `--ckpt-every` as a time (issue 49): two ranks in one process, each with its own clock,
//! checkpoint at the same steps (a checkpoint is complete only when every rank wrote its
//! part and agreed: its manifest), and a long interval leaves only the final one.

mod common;

use common::cli::*;
use std::path::Path;

/// The steps of `out`'s complete checkpoints (a directory with its manifest, in `group-0/`
/// for ZeRO's).
fn complete(out: &Path) -> Vec<u64> {
    let mut steps: Vec<u64> = std::fs::read_dir(out.join("checkpoints"))
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            let n = p
                .file_name()?
                .to_str()?
                .strip_prefix("step-")?
                .parse()
                .ok()?;
            train::state::manifest_dir(&p)
                .join("manifest.json")
                .is_file()
                .then_some(n)
        })
        .collect();
    steps.sort_unstable();
    steps
}

#[test]
fn a_time_cadence_checkpoints_every_rank_at_the_same_steps() {
    let tmp = tempfile::tempdir().unwrap();
    let world = [
        "--world",
        "2",
        "--backend",
        "cpu",
        "--steps",
        "8",
        "--keep",
        "20",
    ];
    // A microsecond: every rank's clock is due at every step; the ranks must still agree.
    let often = tmp.path().join("often");
    let err = ok(
        &often,
        &[&world[..], &["--ckpt-every", "0.000001s"]].concat(),
    );
    assert!(err.contains("every 0.001 ms of training"), "{err}");
    let got = complete(&often);
    assert!(
        got.len() >= 3 && got.last() == Some(&8),
        "checkpoints {got:?}: a 1 us cadence checkpoints most steps"
    );
    assert_eq!(logged_steps(&often), (1..=8).collect::<Vec<_>>());
    // Validation at every step: each step's values are read by a flush, never by the next
    // step; the agreement must still reach every rank.
    let eval = tmp.path().join("eval");
    let args = [
        &world[..],
        &["--ckpt-every", "0.000001s", "--eval-every", "1"],
    ]
    .concat();
    ok(&eval, &args);
    let got = complete(&eval);
    assert!(
        got.len() >= 3,
        "checkpoints {got:?}: validation at every step hid the agreement"
    );
    // An hour: the final checkpoint only.
    let rare = tmp.path().join("rare");
    let err = ok(&rare, &[&world[..], &["--ckpt-every", "60m"]].concat());
    assert!(err.contains("every 1 h of training"), "{err}");
    assert_eq!(complete(&rare), vec![8]);
}

#[test]
fn a_bad_cadence_is_refused_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    for bad in ["0", "5 parsecs", "0m"] {
        let o = run(
            &tmp.path().join("bad"),
            &["--steps", "2", "--ckpt-every", bad],
        );
        assert!(!o.status.success(), "--ckpt-every {bad} accepted");
        assert!(stderr(&o).contains("--ckpt-every"), "{bad}: {}", stderr(&o));
    }
}

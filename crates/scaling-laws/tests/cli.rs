//! End-to-end runs of the binary: JSON shape on the shipped data, clean errors on bad files.

use std::path::PathBuf;
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_scaling-laws"))
}

fn data_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/isoflops_curves.json")
}

#[test]
fn json_report_has_the_documented_shape() {
    let plots = std::env::temp_dir().join(format!("scaling-laws-plots-{}", std::process::id()));
    let out = bin()
        .args(["fit", "--json", "--resamples", "20", "--plots"])
        .arg(&plots)
        .arg(data_file())
        .output()
        .expect("run binary");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    for key in ["approach1", "approach2"] {
        for field in ["n_coefficient", "n_exponent", "d_coefficient", "d_exponent"] {
            assert!(v[key][field].is_f64(), "{key}.{field}");
        }
        let preds = v[key]["predictions"].as_array().expect("predictions");
        assert_eq!(preds[0]["compute"].as_f64(), Some(1e23));
        assert_eq!(preds[1]["compute"].as_f64(), Some(1e24));
        assert!(preds[1]["n_opt"].is_f64() && preds[1]["d_opt"].is_f64());
    }
    for field in ["E", "A", "B", "alpha", "beta"] {
        assert!(v["approach3"][field].is_f64(), "approach3.{field}");
    }
    assert_eq!(
        v["approach3"]["predictions"].as_array().map(Vec::len),
        Some(2)
    );
    for svg in ["n_opt.svg", "d_opt.svg", "isoflop_profiles.svg"] {
        let text = std::fs::read_to_string(plots.join(svg)).expect(svg);
        assert!(text.starts_with("<svg"), "{svg}");
    }
    let _ = std::fs::remove_dir_all(&plots);
}

#[test]
fn bad_file_fails_cleanly_naming_the_record() {
    let path = std::env::temp_dir().join(format!("scaling-laws-bad-{}.json", std::process::id()));
    std::fs::write(
        &path,
        r#"[{"parameters": 1e8, "compute_budget": 1e19, "final_loss": 3.5},
            {"parameters": 2e8, "compute_budget": -1e19, "final_loss": 3.4}]"#,
    )
    .expect("write temp file");
    let out = bin().arg("fit").arg(&path).output().expect("run binary");
    let _ = std::fs::remove_file(&path);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("record 1") && err.contains("compute_budget"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn empty_file_fails_cleanly() {
    let path = std::env::temp_dir().join(format!("scaling-laws-empty-{}.json", std::process::id()));
    std::fs::write(&path, "").expect("write temp file");
    let out = bin().arg("fit").arg(&path).output().expect("run binary");
    let _ = std::fs::remove_file(&path);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("empty") && !err.contains("panicked"), "{err}");
}

//! The report's "parity with PyTorch" section: for each dtype that `run.sh train-parity`
//! compared (`parity/DTYPE/compare.json`, written by `train compare`, beside the results),
//! the two trainers' final losses, the bar's statistics, and their curves overlaid.

use anyhow::{Context, Result};
use serde::Deserialize;
use std::fmt::Write as _;
use std::path::Path;

#[derive(Deserialize)]
struct Side {
    label: String,
    final_train_loss: Option<f64>,
    final_val_loss: Option<f64>,
}

#[derive(Deserialize)]
struct Val {
    step: u64,
    abs_diff: f64,
}

#[derive(Deserialize)]
struct Compare {
    a: Side,
    b: Side,
    common_steps: u64,
    last: u64,
    mean_abs_train_last: f64,
    val: Vec<Val>,
    max_abs_val: Option<f64>,
}

/// The bar of issue 26: nats, by dtype.
fn bound(dtype: &str) -> f64 {
    if dtype == "bf16" {
        0.05
    } else {
        0.02
    }
}

/// Largest |Δ validation| among the evaluations in the last `last` steps.
fn max_val_last(c: &Compare) -> Option<f64> {
    let from = c.common_steps.saturating_sub(c.last);
    c.val
        .iter()
        .filter(|v| v.step > from)
        .map(|v| v.abs_diff)
        .reduce(f64::max)
}

fn f(x: Option<f64>) -> String {
    x.map_or("-".into(), |x| format!("{x:.4}"))
}

/// Appends the section for `dir` (= results dir/parity); nothing when it has no comparison.
pub fn section(md: &mut String, dir: &Path, out: &Path) -> Result<()> {
    let mut rows = Vec::new();
    for dtype in ["fp32", "bf16"] {
        let p = dir.join(dtype).join("compare.json");
        let Ok(text) = std::fs::read_to_string(&p) else {
            continue;
        };
        let c: Compare =
            serde_json::from_str(&text).with_context(|| format!("reading {}", p.display()))?;
        let svg = dir.join(dtype).join("compare.svg");
        let img = format!("parity-{dtype}.svg");
        let shown = std::fs::copy(&svg, out.join(&img)).is_ok();
        rows.push((dtype, c, shown.then_some(img)));
    }
    if rows.is_empty() {
        return Ok(());
    }
    md.push_str("## Parity with PyTorch (`train` against `torch_train.py`)\n\n");
    md.push_str("Same initial weights, windows, schedule, clipping and AdamW; the bar: mean |Δ train loss| over the last steps and |Δ validation loss| there ≤ 0.02 nats (fp32), ≤ 0.05 (bf16).\n\n");
    md.push_str("| dtype | steps | train, ours / torch | validation, ours / torch | mean \\|Δ train\\| (last) | max \\|Δ val\\| (last) | max \\|Δ val\\| (all) | bar |\n|---|---:|---:|---:|---:|---:|---:|---|\n");
    for (dtype, c, _) in &rows {
        let last = max_val_last(c);
        let ok = c.mean_abs_train_last <= bound(dtype) && last.is_none_or(|v| v <= bound(dtype));
        writeln!(
            md,
            "| {dtype} | {} (last {}) | {} / {} | {} / {} | {:.2e} | {} | {} | {} |",
            c.common_steps,
            c.last,
            f(c.a.final_train_loss),
            f(c.b.final_train_loss),
            f(c.a.final_val_loss),
            f(c.b.final_val_loss),
            c.mean_abs_train_last,
            last.map_or("-".into(), |v| format!("{v:.2e}")),
            c.max_abs_val.map_or("-".into(), |v| format!("{v:.2e}")),
            if ok { "met" } else { "not met" }
        )?;
    }
    md.push('\n');
    for (dtype, c, img) in &rows {
        if let Some(img) = img {
            writeln!(md, "![{dtype}: {} and {}]({img})\n", c.a.label, c.b.label)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_the_comparisons_and_judges_the_last_evaluations() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("parity");
        for (dtype, late) in [("fp32", 0.001), ("bf16", 0.07)] {
            std::fs::create_dir_all(p.join(dtype)).unwrap();
            let c = serde_json::json!({
                "a": {"label": "ours", "final_train_loss": 0.43, "final_val_loss": 0.41},
                "b": {"label": "torch", "final_train_loss": 0.42, "final_val_loss": 0.40},
                "common_steps": 2000, "last": 200, "mean_abs_train_last": 0.002,
                "val": [{"step": 1000, "abs_diff": 0.09}, {"step": 2000, "abs_diff": late}],
                "max_abs_val": 0.09
            });
            std::fs::write(p.join(dtype).join("compare.json"), c.to_string()).unwrap();
        }
        std::fs::write(p.join("fp32").join("compare.svg"), "<svg/>").unwrap();
        let mut md = String::new();
        section(&mut md, &p, dir.path()).unwrap();
        let fp32 = md.lines().find(|l| l.starts_with("| fp32")).unwrap();
        let bf16 = md.lines().find(|l| l.starts_with("| bf16")).unwrap();
        assert!(
            fp32.ends_with("| met |") && fp32.contains("1.00e-3"),
            "{fp32}"
        );
        assert!(
            bf16.ends_with("| not met |"),
            "a late |Δ val| of 0.07 > 0.05: {bf16}"
        );
        assert!(md.contains("](parity-fp32.svg)") && !md.contains("parity-bf16.svg"));
        assert!(dir.path().join("parity-fp32.svg").exists());
        let mut none = String::new();
        section(&mut none, &dir.path().join("nothing"), dir.path()).unwrap();
        assert!(none.is_empty());
    }
}

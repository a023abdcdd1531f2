//! Two trainers' logs side by side (issue 26, parity with PyTorch): ours and
//! `scripts/anchors/torch_train.py` write the same JSON-lines schema ([`crate::log`]), from
//! the same initial weights, windows, schedule and clipping. [`compare`] lines them up by
//! step: the mean |Δ train loss| over the last `last` common steps (the parity bar's
//! statistic), the largest |Δ| anywhere, |Δ validation loss| at each common evaluation;
//! [`write`](fn@write) saves that as JSON and the curves overlaid as SVG.

use crate::log::{self, Curve, Record};
use anyhow::{bail, Context, Result};
use plotters::style::RGBColor;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// One step's two losses.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Pair {
    pub step: u64,
    pub a: f64,
    pub b: f64,
    pub abs_diff: f64,
}

/// One side's summary.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Side {
    pub label: String,
    pub train_steps: usize,
    pub final_train_loss: Option<f64>,
    pub final_val_loss: Option<f64>,
    /// The last train record's elapsed_s: training time without the first evaluation.
    pub seconds: Option<f64>,
    pub first_grad_norm: Option<f64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Comparison {
    pub a: Side,
    pub b: Side,
    /// Train steps logged by both.
    pub common_steps: usize,
    /// The window of the mean: the last `last` common steps (all of them if fewer).
    pub last: usize,
    pub mean_abs_train_last: f64,
    pub max_abs_train_last: f64,
    /// Over every common step, and where.
    pub max_abs_train: f64,
    pub max_abs_train_step: u64,
    /// The first common step's losses (a mismatch there is in the model or the loss).
    pub first: Pair,
    pub val: Vec<Pair>,
    pub max_abs_val: Option<f64>,
}

fn by_step(records: &[Record]) -> (BTreeMap<u64, f64>, BTreeMap<u64, f64>) {
    let (t, v) = log::series(records);
    (t.into_iter().collect(), v.into_iter().collect())
}

fn pairs(a: &BTreeMap<u64, f64>, b: &BTreeMap<u64, f64>) -> Vec<Pair> {
    a.iter()
        .filter_map(|(&step, &x)| {
            b.get(&step).map(|&y| Pair {
                step,
                a: x,
                b: y,
                abs_diff: (x - y).abs(),
            })
        })
        .collect()
}

fn side(label: &str, records: &[Record]) -> Side {
    let train: Vec<_> = records
        .iter()
        .filter_map(|r| match *r {
            Record::Train {
                loss,
                elapsed_s,
                grad_norm,
                ..
            } => Some((loss, elapsed_s, grad_norm)),
            _ => None,
        })
        .collect();
    let val = records.iter().rev().find_map(|r| match *r {
        Record::Val { loss, .. } => Some(loss),
        _ => None,
    });
    Side {
        label: label.into(),
        train_steps: train.len(),
        final_train_loss: train.last().map(|t| t.0),
        final_val_loss: val,
        seconds: train.last().map(|t| t.1),
        first_grad_norm: train.first().and_then(|t| t.2),
    }
}

/// Lines up logs `a` and `b` by step; refuses logs with no train step in common. A NaN
/// loss on either side makes the statistics NaN (it is not skipped).
pub fn compare(labels: [&str; 2], a: &[Record], b: &[Record], last: usize) -> Result<Comparison> {
    if last == 0 {
        bail!("--last must be positive");
    }
    let (ta, va) = by_step(a);
    let (tb, vb) = by_step(b);
    let train = pairs(&ta, &tb);
    let Some(first) = train.first().cloned() else {
        bail!(
            "the logs have no train step in common ({} has {} train records, {} has {})",
            labels[0],
            ta.len(),
            labels[1],
            tb.len()
        );
    };
    let tail = &train[train.len().saturating_sub(last)..];
    let nan_max = |xs: &mut dyn Iterator<Item = f64>| {
        xs.fold(0f64, |m, x| {
            if x.is_nan() || m.is_nan() {
                f64::NAN
            } else {
                m.max(x)
            }
        })
    };
    let worst = train.iter().fold(&train[0], |w, p| {
        if p.abs_diff > w.abs_diff || p.abs_diff.is_nan() {
            p
        } else {
            w
        }
    });
    let val = pairs(&va, &vb);
    Ok(Comparison {
        a: side(labels[0], a),
        b: side(labels[1], b),
        common_steps: train.len(),
        last: tail.len(),
        mean_abs_train_last: tail.iter().map(|p| p.abs_diff).sum::<f64>() / tail.len() as f64,
        max_abs_train_last: nan_max(&mut tail.iter().map(|p| p.abs_diff)),
        max_abs_train: worst.abs_diff,
        max_abs_train_step: worst.step,
        first,
        max_abs_val: (!val.is_empty()).then(|| nan_max(&mut val.iter().map(|p| p.abs_diff))),
        val,
    })
}

impl Comparison {
    /// A few lines for people.
    pub fn summary(&self) -> String {
        let (a, b) = (&self.a.label, &self.b.label);
        let mut s = format!(
            "{} common train steps ({a} {}, {b} {})\nstep {}: {a} {:.6}, {b} {:.6} (|Δ| {:.2e}); grad norm {a} {}, {b} {}\nmean |Δ train loss| over the last {} steps: {:.3e} (max {:.3e}); max |Δ| anywhere {:.3e} at step {}\n",
            self.common_steps, self.a.train_steps, self.b.train_steps,
            self.first.step, self.first.a, self.first.b, self.first.abs_diff,
            opt(self.a.first_grad_norm), opt(self.b.first_grad_norm),
            self.last, self.mean_abs_train_last, self.max_abs_train_last, self.max_abs_train, self.max_abs_train_step
        );
        for p in &self.val {
            s += &format!(
                "validation at step {}: {a} {:.6}, {b} {:.6} (|Δ| {:.3e})\n",
                p.step, p.a, p.b, p.abs_diff
            );
        }
        s
    }
}

fn opt(x: Option<f64>) -> String {
    x.map_or("-".into(), |x| format!("{x:.6}"))
}

/// Refuses a log with a step recorded twice (two runs appended into one file, or one
/// run's records twice): lining it up by step would mix them.
fn once_each(path: &Path, recs: &[log::Record]) -> Result<()> {
    let mut seen = std::collections::HashSet::new();
    for r in recs {
        let kind = std::mem::discriminant(r);
        if !seen.insert((kind, r.step())) {
            anyhow::bail!(
                "{}: step {} has two {} records (two runs in one log?): compare logs of one run each",
                path.display(),
                r.step(),
                match r {
                    log::Record::Train { .. } => "train",
                    log::Record::Val { .. } => "validation",
                    log::Record::Skipped { .. } => "skipped",
                }
            );
        }
    }
    Ok(())
}

/// Reads two logs, compares them, writes `out/compare.json` and `out/compare.svg`.
pub fn write(paths: [&Path; 2], labels: [&str; 2], last: usize, out: &Path) -> Result<Comparison> {
    let a = log::read(paths[0])?;
    let b = log::read(paths[1])?;
    for (p, recs) in paths.iter().zip([&a, &b]) {
        once_each(p, recs)?;
    }
    let c = compare(labels, &a, &b, last)?;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let json = out.join("compare.json");
    std::fs::write(&json, serde_json::to_string_pretty(&c)? + "\n")
        .with_context(|| format!("writing {}", json.display()))?;
    let ((at, av), (bt, bv)) = (log::series(&a), log::series(&b));
    let curve = |name: String, points, color, width, dots| Curve {
        name,
        points,
        color,
        width,
        dots,
    };
    const ORANGE: RGBColor = RGBColor(230, 120, 0);
    const PURPLE: RGBColor = RGBColor(140, 40, 160);
    let curves = [
        curve(
            format!("{} train", labels[0]),
            &at[..],
            plotters::style::BLUE,
            1,
            false,
        ),
        curve(format!("{} train", labels[1]), &bt[..], ORANGE, 1, false),
        curve(
            format!("{} validation", labels[0]),
            &av[..],
            plotters::style::RED,
            2,
            true,
        ),
        curve(
            format!("{} validation", labels[1]),
            &bv[..],
            PURPLE,
            2,
            true,
        ),
    ];
    let title = format!(
        "{} vs {}: mean |Δ train loss| over the last {} steps {:.2e}",
        labels[0], labels[1], c.last, c.mean_abs_train_last
    );
    log::plot_curves(&out.join("compare.svg"), &curves, None, &title)?;
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn train(step: u64, loss: f64) -> Record {
        Record::Train {
            step,
            loss,
            lr: 1e-3,
            grad_norm: Some(1.0),
            tokens_per_s: 1.0,
            mfu: None,
            elapsed_s: step as f64,
        }
    }

    #[test]
    fn the_statistics_over_common_steps() {
        // a: steps 1..=10, loss 5 − 0.1 s; b: the same + 0.01 s on steps 2..=12 (one more
        // than a at each end), so 9 common steps 2..=10 with |Δ| = 0.01·s.
        let mut a: Vec<Record> = (1..=10).map(|s| train(s, 5.0 - 0.1 * s as f64)).collect();
        let mut b: Vec<Record> = (2..=12)
            .map(|s| train(s, 5.0 - 0.1 * s as f64 + 0.01 * s as f64))
            .collect();
        a.push(Record::Val { step: 0, loss: 6.0 });
        b.push(Record::Val { step: 0, loss: 6.0 });
        a.push(Record::Val {
            step: 10,
            loss: 4.0,
        });
        b.push(Record::Val {
            step: 10,
            loss: 4.25,
        });
        b.push(Record::Val {
            step: 12,
            loss: 3.0,
        });
        let c = compare(["ours", "torch"], &a, &b, 3).unwrap();
        assert_eq!((c.common_steps, c.last), (9, 3));
        // The last 3 common steps are 8, 9, 10: mean |Δ| = 0.09.
        assert!((c.mean_abs_train_last - 0.09).abs() < 1e-12, "{c:?}");
        assert!((c.max_abs_train_last - 0.10).abs() < 1e-12);
        assert!((c.max_abs_train - 0.10).abs() < 1e-12 && c.max_abs_train_step == 10);
        assert_eq!(c.first.step, 2);
        assert!((c.first.abs_diff - 0.02).abs() < 1e-12);
        // Validation at the common steps 0 and 10 only.
        assert_eq!(c.val.iter().map(|p| p.step).collect::<Vec<_>>(), [0, 10]);
        assert_eq!(c.max_abs_val, Some(0.25));
        assert_eq!((c.a.train_steps, c.b.train_steps), (10, 11));
        assert_eq!(c.a.final_val_loss, Some(4.0));
        assert_eq!(c.b.final_val_loss, Some(3.0));
        assert_eq!(c.b.seconds, Some(12.0));
        // A window longer than the overlap takes all of it: mean of 0.02..=0.10.
        let all = compare(["a", "b"], &a, &b, 200).unwrap();
        assert_eq!(all.last, 9);
        assert!((all.mean_abs_train_last - 0.06).abs() < 1e-12);
        // Identical logs: zero.
        let same = compare(["a", "b"], &a, &a, 200).unwrap();
        assert_eq!(
            (same.mean_abs_train_last, same.max_abs_val),
            (0.0, Some(0.0))
        );
        // A NaN is not skipped.
        let mut n = b.clone();
        n[8] = train(10, f64::NAN);
        let c = compare(["a", "b"], &a, &n, 3).unwrap();
        assert!(c.mean_abs_train_last.is_nan() && c.max_abs_train.is_nan());
        // No overlap: refused, naming the counts.
        let e = compare(["a", "b"], &a, &[train(99, 1.0)], 3).unwrap_err();
        assert!(e.to_string().contains("no train step in common"), "{e}");
    }

    #[test]
    fn write_saves_json_and_svg() {
        let d = tempfile::tempdir().unwrap();
        let lines = |off: f64| {
            (1..=5)
                .map(|s| serde_json::to_string(&train(s, 3.0 + off)).unwrap() + "\n")
                .collect::<String>()
        };
        std::fs::write(d.path().join("a.jsonl"), lines(0.0)).unwrap();
        std::fs::write(d.path().join("b.jsonl"), lines(0.5)).unwrap();
        let out = d.path().join("cmp");
        let c = write(
            [&d.path().join("a.jsonl"), &d.path().join("b.jsonl")],
            ["ours", "torch"],
            200,
            &out,
        )
        .unwrap();
        assert!((c.mean_abs_train_last - 0.5).abs() < 1e-12);
        let j: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("compare.json")).unwrap()).unwrap();
        assert_eq!(j["common_steps"], 5);
        let svg = std::fs::read_to_string(out.join("compare.svg")).unwrap();
        assert!(svg.contains("torch train") && svg.contains("ours train"));
        // A log line that is not a record is named.
        std::fs::write(d.path().join("b.jsonl"), "{\"type\":\"oops\"}\n").unwrap();
        let e = write(
            [&d.path().join("a.jsonl"), &d.path().join("b.jsonl")],
            ["ours", "torch"],
            200,
            &out,
        )
        .unwrap_err();
        assert!(format!("{e:#}").contains("b.jsonl:1"), "{e:#}");
        // Every step twice: two runs in one log.
        std::fs::write(d.path().join("b.jsonl"), lines(0.5) + &lines(0.7)).unwrap();
        let e = write(
            [&d.path().join("a.jsonl"), &d.path().join("b.jsonl")],
            ["ours", "torch"],
            200,
            &out,
        )
        .unwrap_err();
        assert!(
            format!("{e:#}").contains("step 1 has two train records"),
            "{e:#}"
        );
    }
}

//! The run's JSON-lines log (`log.jsonl`: one `train` record per step, or a `skipped` one,
//! one `val` record per evaluation) and its loss curve (`loss.svg`, plotters).

use anyhow::{Context, Result};
use plotters::prelude::*;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Record {
    /// After optimizer step `step` (1-based).
    Train {
        step: u64,
        loss: f64,
        lr: f64,
        /// The global gradient norm before clipping; absent where AdamW ran inside the
        /// backward (no clipping: no norm was taken).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        grad_norm: Option<f64>,
        /// The step's tokens (every rank's) over its time: from the end of the step
        /// before it to its own end, on the GPU's clock where it ran on one.
        tokens_per_s: f64,
        elapsed_s: f64,
        /// The MFU that `tokens_per_s` makes (`train::mfu`): bf16 on a GPU of known peak.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mfu: Option<f64>,
    },
    /// Validation loss after `step` steps (0: the initial model).
    Val { step: u64, loss: f64 },
    /// Optimizer step `step` skipped: its loss or gradient norm was not finite, and AdamW
    /// wrote nothing (`train run --skip-nonfinite`).
    Skipped { step: u64, lr: f64 },
}

impl Record {
    pub fn step(&self) -> u64 {
        match self {
            Record::Train { step, .. }
            | Record::Val { step, .. }
            | Record::Skipped { step, .. } => *step,
        }
    }
}

/// (step, loss) points.
pub type Series = Vec<(u64, f64)>;

pub struct Log {
    path: PathBuf,
    pub records: Vec<Record>,
}

impl Log {
    /// Opens `path` for appending, keeping the records of steps up to `upto` (a resumed
    /// run writes again what came after its checkpoint). The file is never rewritten in
    /// place: where records must go (steps after `upto`, or a last line cut short by a
    /// kill or a full disk, dropped with a warning naming it), the kept ones are written to
    /// a temporary file that then replaces it. Any other line that does not parse is an
    /// error naming it.
    pub fn open(path: &Path, upto: u64) -> Result<Self> {
        let (all, torn) = match path.exists() {
            true => read_tolerant(path)?,
            false => (Vec::new(), None),
        };
        if let Some(line) = torn {
            eprintln!(
                "train: {}:{line}: dropping a partial last line (a write cut short)",
                path.display()
            );
        }
        let records: Vec<Record> = all.iter().filter(|r| r.step() <= upto).cloned().collect();
        if records.len() != all.len() || torn.is_some() {
            let mut text = String::new();
            for r in &records {
                text += &serde_json::to_string(r)?;
                text.push('\n');
            }
            checkpoint::write_atomic(path, text.as_bytes())?;
        }
        Ok(Self {
            path: path.to_path_buf(),
            records,
        })
    }

    pub fn push(&mut self, r: Record) -> Result<()> {
        let line = serde_json::to_string(&r)? + "\n";
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .and_then(|mut f| f.write_all(line.as_bytes()))
            .with_context(|| format!("appending to {}", self.path.display()))?;
        self.records.push(r);
        Ok(())
    }

    /// (train, validation) losses by step.
    pub fn series(&self) -> (Series, Series) {
        series(&self.records)
    }
}

/// The records of a log file (ours, or another trainer's in the same schema), without
/// changing it; a line that does not parse is an error naming it.
/// [`read`], except that a last line that does not parse and does not end in a newline
/// (a write cut short) is left out: the records and that line's number.
fn read_tolerant(path: &Path) -> Result<(Vec<Record>, Option<usize>)> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let lines: Vec<&str> = text.lines().collect();
    let last_torn = !text.ends_with('\n')
        && lines
            .last()
            .is_some_and(|l| serde_json::from_str::<Record>(l).is_err());
    let n = lines.len() - usize::from(last_torn);
    let records = lines[..n]
        .iter()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line)
                .with_context(|| format!("{}:{}: not a log record", path.display(), i + 1))
        })
        .collect::<Result<_>>()?;
    Ok((records, last_torn.then_some(lines.len())))
}

pub fn read(path: &Path) -> Result<Vec<Record>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line)
                .with_context(|| format!("{}:{}: not a log record", path.display(), i + 1))
        })
        .collect()
}

/// (train, validation) losses by step.
pub fn series(records: &[Record]) -> (Series, Series) {
    let (mut t, mut v) = (Vec::new(), Vec::new());
    for r in records {
        match *r {
            Record::Train { step, loss, .. } => t.push((step, loss)),
            Record::Val { step, loss } => v.push((step, loss)),
            Record::Skipped { .. } => {}
        }
    }
    (t, v)
}

/// One line of a loss plot: its legend, its (step, loss) points, its colour and width,
/// and whether each point is also marked with a dot (sparse series: validation).
pub struct Curve<'a> {
    pub name: String,
    pub points: &'a [(u64, f64)],
    pub color: RGBColor,
    pub width: u32,
    pub dots: bool,
}

/// Train and validation loss against the step, with the unigram entropy as a line.
pub fn plot(
    path: &Path,
    train: &[(u64, f64)],
    val: &[(u64, f64)],
    unigram: f64,
    title: &str,
) -> Result<()> {
    let curves = [
        Curve {
            name: "train".into(),
            points: train,
            color: BLUE,
            width: 1,
            dots: false,
        },
        Curve {
            name: "validation".into(),
            points: val,
            color: RED,
            width: 2,
            dots: true,
        },
    ];
    plot_curves(path, &curves, Some(unigram), title)
}

/// Several loss curves against the step on one chart (optionally the unigram entropy as
/// a black line), legend in the corner: one run's train and validation loss, or two
/// trainers' curves overlaid (`train compare`).
pub fn plot_curves(path: &Path, curves: &[Curve], unigram: Option<f64>, title: &str) -> Result<()> {
    let mut svg = String::new();
    draw(&mut svg, path, curves, unigram, title)?;
    Ok(checkpoint::write_atomic(path, svg.as_bytes())?)
}

fn draw(
    svg: &mut String,
    path: &Path,
    curves: &[Curve],
    unigram: Option<f64>,
    title: &str,
) -> Result<()> {
    let root = SVGBackend::with_string(svg, (900, 540)).into_drawing_area();
    let err = |e: &dyn std::fmt::Display| anyhow::anyhow!("plotting {}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let all = || curves.iter().flat_map(|c| c.points.iter());
    let xmax = all().map(|p| p.0).max().unwrap_or(1).max(1) as f64;
    let ys = all().map(|p| p.1).filter(|y| y.is_finite());
    let first = unigram.or(ys.clone().next()).unwrap_or(1.0);
    let ymax = ys.clone().fold(first, f64::max) * 1.05;
    let ymin = ys.fold(first, f64::min).min(0.0);
    let mut ch = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d(0f64..xmax, ymin..ymax)
        .map_err(|e| err(&e))?;
    ch.configure_mesh()
        .x_desc("step")
        .y_desc("loss (nats/token)")
        .draw()
        .map_err(|e| err(&e))?;
    for c in curves {
        let color = c.color;
        ch.draw_series(LineSeries::new(
            c.points.iter().map(|&(s, l)| (s as f64, l)),
            color.stroke_width(c.width),
        ))
        .map_err(|e| err(&e))?
        .label(c.name.as_str())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        if c.dots {
            ch.draw_series(
                c.points
                    .iter()
                    .map(|&(s, l)| Circle::new((s as f64, l), 3, color.filled())),
            )
            .map_err(|e| err(&e))?;
        }
    }
    if let Some(u) = unigram {
        ch.draw_series(LineSeries::new(
            [(0.0, u), (xmax, u)],
            BLACK.stroke_width(1),
        ))
        .map_err(|e| err(&e))?
        .label(format!("unigram entropy {u:.3}"))
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
    }
    ch.configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

//! The run's JSON-lines log (`log.jsonl`: one `train` record per step, one `val` record
//! per evaluation) and its loss curve (`loss.svg`, plotters).

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
        grad_norm: f64,
        tokens_per_s: f64,
        elapsed_s: f64,
    },
    /// Validation loss after `step` steps (0: the initial model).
    Val { step: u64, loss: f64 },
}

impl Record {
    pub fn step(&self) -> u64 {
        match self {
            Record::Train { step, .. } | Record::Val { step, .. } => *step,
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
    /// Opens `path`, keeping the records of steps up to `upto` (a resumed run rewrites
    /// what came after its checkpoint); a line that does not parse is an error naming it.
    pub fn open(path: &Path, upto: u64) -> Result<Self> {
        let mut records = Vec::new();
        if let Ok(text) = std::fs::read_to_string(path) {
            for (i, line) in text
                .lines()
                .enumerate()
                .filter(|(_, l)| !l.trim().is_empty())
            {
                let r: Record = serde_json::from_str(line)
                    .with_context(|| format!("{}:{}: not a log record", path.display(), i + 1))?;
                if r.step() <= upto {
                    records.push(r);
                }
            }
        }
        let mut f =
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
        for r in &records {
            writeln!(f, "{}", serde_json::to_string(r)?)?;
        }
        Ok(Self {
            path: path.to_path_buf(),
            records,
        })
    }

    pub fn push(&mut self, r: Record) -> Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.path)
            .with_context(|| format!("appending to {}", self.path.display()))?;
        writeln!(f, "{}", serde_json::to_string(&r)?)?;
        self.records.push(r);
        Ok(())
    }

    /// (train, validation) losses by step.
    pub fn series(&self) -> (Series, Series) {
        let (mut t, mut v) = (Vec::new(), Vec::new());
        for r in &self.records {
            match *r {
                Record::Train { step, loss, .. } => t.push((step, loss)),
                Record::Val { step, loss } => v.push((step, loss)),
            }
        }
        (t, v)
    }
}

/// Train and validation loss against the step, with the unigram entropy as a line.
pub fn plot(
    path: &Path,
    train: &[(u64, f64)],
    val: &[(u64, f64)],
    unigram: f64,
    title: &str,
) -> Result<()> {
    let root = SVGBackend::new(path, (900, 540)).into_drawing_area();
    let err = |e: &dyn std::fmt::Display| anyhow::anyhow!("plotting {}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let xmax = train
        .iter()
        .chain(val)
        .map(|p| p.0)
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let ys = train
        .iter()
        .chain(val)
        .map(|p| p.1)
        .filter(|y| y.is_finite());
    let ymax = ys.clone().fold(unigram, f64::max) * 1.05;
    let ymin = ys.fold(unigram, f64::min).min(0.0);
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
    ch.draw_series(LineSeries::new(
        train.iter().map(|&(s, l)| (s as f64, l)),
        BLUE.stroke_width(1),
    ))
    .map_err(|e| err(&e))?
    .label("train")
    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE));
    ch.draw_series(LineSeries::new(
        val.iter().map(|&(s, l)| (s as f64, l)),
        RED.stroke_width(2),
    ))
    .map_err(|e| err(&e))?
    .label("validation")
    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED));
    ch.draw_series(
        val.iter()
            .map(|&(s, l)| Circle::new((s as f64, l), 3, RED.filled())),
    )
    .map_err(|e| err(&e))?;
    ch.draw_series(LineSeries::new(
        [(0.0, unigram), (xmax, unigram)],
        BLACK.stroke_width(1),
    ))
    .map_err(|e| err(&e))?
    .label(format!("unigram entropy {unigram:.3}"))
    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
    ch.configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

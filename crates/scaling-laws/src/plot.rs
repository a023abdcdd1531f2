//! SVG plots: C vs N_opt, C vs D_opt (log-log, fits extrapolated to ≥ 1e24) and the
//! IsoFLOP profiles (loss vs N per budget) with their fitted parabolas.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use plotters::prelude::*;

use crate::pipeline::Analysis;

const SIZE: (u32, u32) = (900, 640);

/// A labelled, coloured polyline.
type Line = (String, RGBColor, Vec<(f64, f64)>);

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("plotting failed: {e}")
}

/// Geometric grid of `k` points from `lo` to `hi`.
fn geomspace(lo: f64, hi: f64, k: usize) -> Vec<f64> {
    let (a, b) = (lo.ln(), hi.ln());
    (0..k)
        .map(|i| (a + (b - a) * i as f64 / (k - 1) as f64).exp())
        .collect()
}

fn log_bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if lo.is_finite() && hi > 0.0 {
        (lo / 2.0, hi * 2.0)
    } else {
        (1.0, 10.0)
    }
}

/// Writes `n_opt.svg`, `d_opt.svg` and `isoflop_profiles.svg` into `dir`; returns their paths.
pub fn write_plots(an: &Analysis, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let n_path = dir.join("n_opt.svg");
    let d_path = dir.join("d_opt.svg");
    let p_path = dir.join("isoflop_profiles.svg");
    optimum_plot(an, &n_path, true)?;
    optimum_plot(an, &d_path, false)?;
    profile_plot(an, &p_path)?;
    Ok(vec![n_path, d_path, p_path])
}

fn optimum_plot(an: &Analysis, path: &Path, model_size: bool) -> Result<()> {
    let c_lo = an.budgets.first().map_or(1e18, |b| b.compute) / 2.0;
    let c_max = an.budgets.last().map_or(1e18, |b| b.compute);
    let extra = an.computes.iter().cloned().fold(1e24f64, f64::max);
    let c_hi = c_max.max(extra) * 2.0;
    let grid = geomspace(c_lo, c_hi, 100);
    let law = an.approach3.law;
    let pick = |fit: &crate::isoflop::IsoFlopFit, c: f64| {
        let (n, d) = fit.predict(c);
        if model_size {
            n
        } else {
            d
        }
    };
    let p3 = |c: f64| {
        if model_size {
            law.n_opt(c)
        } else {
            law.d_opt(c)
        }
    };
    let lines: Vec<Line> = vec![
        (
            "approach 1 fit".into(),
            BLUE,
            grid.iter().map(|&c| (c, pick(&an.approach1, c))).collect(),
        ),
        (
            "approach 2 fit".into(),
            RED,
            grid.iter().map(|&c| (c, pick(&an.approach2, c))).collect(),
        ),
        (
            "approach 3 (parametric)".into(),
            GREEN,
            grid.iter().map(|&c| (c, p3(c))).collect(),
        ),
    ];
    let point_sets = [
        ("approach 1: lowest-loss runs", BLUE, &an.approach1.optima),
        ("approach 2: parabola vertices", RED, &an.approach2.optima),
    ];
    let value = |o: &crate::isoflop::Optimum| if model_size { o.n_opt } else { o.d_opt };
    let (y_lo, y_hi) = log_bounds(
        lines
            .iter()
            .flat_map(|l| l.2.iter().map(|p| p.1))
            .chain(point_sets.iter().flat_map(|s| s.2.iter().map(value))),
    );
    let (name, caption) = if model_size {
        ("N_opt (parameters)", "Compute-optimal model size")
    } else {
        ("D_opt (tokens)", "Compute-optimal training tokens")
    };
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d((c_lo..c_hi).log_scale(), (y_lo..y_hi).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("compute C (FLOPs)")
        .y_desc(name)
        .x_label_formatter(&|x| format!("{x:.0e}"))
        .y_label_formatter(&|y| format!("{y:.0e}"))
        .draw()
        .map_err(err)?;
    for (label, color, pts) in lines {
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(2)))
            .map_err(err)?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    for (label, color, optima) in point_sets {
        chart
            .draw_series(
                optima
                    .iter()
                    .map(|o| Circle::new((o.compute, value(o)), 4, color.filled())),
            )
            .map_err(err)?
            .label(label)
            .legend(move |(x, y)| Circle::new((x + 10, y), 4, color.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

fn profile_plot(an: &Analysis, path: &Path) -> Result<()> {
    let all = || an.budgets.iter().flat_map(|b| b.runs.iter());
    let (n_lo, n_hi) = log_bounds(all().map(|r| r.parameters));
    let (l_min, l_max) = all().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), r| {
        (lo.min(r.final_loss), hi.max(r.final_loss))
    });
    let pad = 0.05 * (l_max - l_min).max(1e-3);
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("IsoFLOP profiles with fitted parabolas", ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d((n_lo..n_hi).log_scale(), (l_min - pad)..(l_max + pad))
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("parameters N")
        .y_desc("final loss")
        .x_label_formatter(&|x| format!("{x:.0e}"))
        .draw()
        .map_err(err)?;
    for (i, b) in an.budgets.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(
                b.runs
                    .iter()
                    .map(|r| Circle::new((r.parameters, r.final_loss), 3, color.filled())),
            )
            .map_err(err)?
            .label(format!("C = {:.0e}", b.compute))
            .legend(move |(x, y)| Circle::new((x + 10, y), 4, color.filled()));
        let parabola = an
            .approach2
            .parabolas
            .iter()
            .find(|p| p.compute == b.compute);
        if let (Some(p), Some(first), Some(last)) = (parabola, b.runs.first(), b.runs.last()) {
            let pts: Vec<(f64, f64)> = geomspace(first.parameters, last.parameters, 60)
                .into_iter()
                .map(|n| (n, p.eval(n)))
                .filter(|&(_, l)| l >= l_min - pad && l <= l_max + pad)
                .collect();
            chart
                .draw_series(LineSeries::new(pts, color.stroke_width(2)))
                .map_err(err)?;
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

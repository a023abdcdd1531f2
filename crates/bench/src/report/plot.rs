//! SVG plots (plotters): bus bandwidth against message size, one curve per rank count.

use crate::records::AllReduceRecord;
use anyhow::{anyhow, Result};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

const COLORS: [RGBColor; 6] = [BLUE, RED, GREEN, MAGENTA, CYAN, BLACK];

type LogXChart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<LogCoord<f64>, RangedCoordf64>>;

fn plot_err(path: &Path) -> impl Fn(&dyn std::fmt::Display) -> anyhow::Error + '_ {
    move |e| anyhow!("plotting {}: {e}", path.display())
}

/// A white canvas with a log-scale x axis over [xmin, xmax] (with margins) and 0..ymax.
fn log_x_chart<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    path: &Path,
    title: &str,
    (xmin, xmax): (f64, f64),
    ymax: f64,
) -> Result<LogXChart<'a, 'b>> {
    let e = plot_err(path);
    root.fill(&WHITE).map_err(|x| e(&x))?;
    ChartBuilder::on(root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d((xmin / 1.5..xmax * 1.5).log_scale(), 0f64..ymax.max(1e-9))
        .map_err(|x| e(&x))
}

/// Draws the legend at `pos` and writes the file.
fn finish<'a, 'b: 'a>(
    chart: &mut LogXChart<'a, 'b>,
    root: &DrawingArea<SVGBackend<'b>, Shift>,
    path: &Path,
    pos: SeriesLabelPosition,
) -> Result<()> {
    let e = plot_err(path);
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.9))
        .position(pos)
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))
}

/// `reference`: (label, busbw GB/s) drawn as a flat dashed line (theoretical peak).
/// `extra`: other measured curves (e.g. PyTorch), as (label, [(bytes, busbw)]).
pub fn busbw_plot(
    path: &Path,
    title: &str,
    recs: &[AllReduceRecord],
    extra: &[(String, Vec<(f64, f64)>)],
    reference: Option<(String, f64)>,
) -> Result<()> {
    let e = plot_err(path);
    let xs = recs
        .iter()
        .map(|r| r.bytes as f64)
        .chain(extra.iter().flat_map(|(_, v)| v.iter().map(|p| p.0)));
    let (xmin, xmax) = xs.fold((f64::MAX, 0f64), |(a, b), x| (a.min(x), b.max(x)));
    if recs.is_empty() || xmin <= 0.0 {
        return Err(anyhow!(
            "no all-reduce records to plot for {}",
            path.display()
        ));
    }
    let ymax = recs
        .iter()
        .map(|r| r.busbw_gbs)
        .chain(extra.iter().flat_map(|(_, v)| v.iter().map(|p| p.1)))
        .chain(reference.iter().map(|r| r.1))
        .fold(0f64, f64::max)
        * 1.1;
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    let mut chart = log_x_chart(&root, path, title, (xmin, xmax), ymax)?;
    chart
        .configure_mesh()
        .x_desc("message size (bytes, log scale)")
        .y_desc("bus bandwidth (GB/s)")
        .x_label_formatter(&|v| crate::allreduce::human_bytes(*v as usize))
        .draw()
        .map_err(|x| e(&x))?;
    let mut worlds: Vec<usize> = recs.iter().map(|r| r.world).collect();
    worlds.sort_unstable();
    worlds.dedup();
    for (i, w) in worlds.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let pts: Vec<(f64, f64)> = recs
            .iter()
            .filter(|r| r.world == *w)
            .map(|r| (r.bytes as f64, r.busbw_gbs))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
            .map_err(|x| e(&x))?
            .label(format!("{} ranks", w))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
        chart
            .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, c.filled())))
            .map_err(|x| e(&x))?;
    }
    for (j, (label, pts)) in extra.iter().enumerate() {
        let c = COLORS[(worlds.len() + j) % COLORS.len()];
        chart
            .draw_series(pts.iter().map(|p| TriangleMarker::new(*p, 5, c.filled())))
            .map_err(|x| e(&x))?
            .label(label.clone())
            .legend(move |(x, y)| TriangleMarker::new((x + 9, y), 5, c.filled()));
    }
    if let Some((label, peak)) = reference {
        let dashes: Vec<(f64, f64)> = (0..60)
            .map(|k| xmin / 1.5 * ((xmax * 2.25 / xmin).powf(k as f64 / 59.0)))
            .map(|x| (x, peak))
            .collect();
        chart
            .draw_series(
                dashes
                    .chunks(2)
                    .map(|seg| PathElement::new(seg.to_vec(), BLACK.stroke_width(1))),
            )
            .map_err(|x| e(&x))?
            .label(label)
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK.stroke_width(1)));
    }
    finish(&mut chart, &root, path, SeriesLabelPosition::UpperLeft)
}

/// One curve: label, points, dashed.
pub type Series = (String, Vec<(f64, f64)>, bool);

/// Curves `series` against a log-scale x axis.
pub fn lines_log_x(
    path: &Path,
    title: &str,
    (x_desc, y_desc): (&str, &str),
    series: &[Series],
) -> Result<()> {
    let e = plot_err(path);
    let pts = || series.iter().flat_map(|s| s.1.iter());
    let (xmin, xmax) = pts().fold((f64::MAX, 0f64), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let ymax = pts().fold(0f64, |a, p| a.max(p.1)) * 1.15;
    if xmin <= 0.0 || xmin > xmax {
        return Err(anyhow!("nothing to plot for {}", path.display()));
    }
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    let mut chart = log_x_chart(&root, path, title, (xmin, xmax), ymax)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()
        .map_err(|x| e(&x))?;
    for (i, (label, pts, dashed)) in series.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let style = c.stroke_width(if *dashed { 1 } else { 2 });
        chart
            .draw_series(LineSeries::new(pts.clone(), style))
            .map_err(|x| e(&x))?
            .label(label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
        if !dashed {
            chart
                .draw_series(pts.iter().map(|p| Circle::new(*p, 3, c.filled())))
                .map_err(|x| e(&x))?;
        }
    }
    finish(&mut chart, &root, path, SeriesLabelPosition::UpperRight)
}

/// A bar per (label, value), labels along the x axis.
pub fn bars(path: &Path, title: &str, y_desc: &str, items: &[(String, f64)]) -> Result<()> {
    let e = plot_err(path);
    if items.is_empty() {
        return Err(anyhow!("nothing to plot for {}", path.display()));
    }
    let ymax = items.iter().map(|i| i.1).fold(0f64, f64::max).max(1e-9) * 1.15;
    let root = SVGBackend::new(path, (900, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let n = items.len();
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d((0..n).into_segmented(), 0f64..ymax)
        .map_err(|x| e(&x))?;
    let labels: Vec<String> = items.iter().map(|i| i.0.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc(y_desc)
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .draw()
        .map_err(|x| e(&x))?;
    chart
        .draw_series(items.iter().enumerate().map(|(i, it)| {
            let mut r = Rectangle::new(
                [
                    (SegmentValue::Exact(i), 0.0),
                    (SegmentValue::Exact(i + 1), it.1),
                ],
                COLORS[i % COLORS.len()].mix(0.7).filled(),
            );
            r.set_margin(0, 0, 12, 12);
            r
        }))
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))
}

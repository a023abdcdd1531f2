//! Bootstrap interval types and percentile summaries of the replicate statistics.

use serde::Serialize;

/// A 95% percentile interval, serialised as `[lo, hi]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    /// 2.5th percentile.
    pub lo: f64,
    /// 97.5th percentile.
    pub hi: f64,
}

impl Serialize for Interval {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        [self.lo, self.hi].serialize(s)
    }
}

/// Intervals of N_opt and D_opt at one compute budget.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PredictionInterval {
    /// Compute budget.
    pub compute: f64,
    /// Interval of N_opt.
    pub n_opt: Interval,
    /// Interval of D_opt.
    pub d_opt: Interval,
}

/// Intervals for approach 1 or 2.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PowerLawIntervals {
    /// k in N_opt = k·C^a.
    pub n_coefficient: Interval,
    /// a.
    pub n_exponent: Interval,
    /// m in D_opt = m·C^b.
    pub d_coefficient: Interval,
    /// b.
    pub d_exponent: Interval,
    /// Per-budget prediction intervals.
    pub predictions: Vec<PredictionInterval>,
    /// Resamples whose fit succeeded.
    pub resamples: usize,
}

/// Intervals for approach 3.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParametricIntervals {
    /// E.
    #[serde(rename = "E")]
    pub e: Interval,
    /// A.
    #[serde(rename = "A")]
    pub a: Interval,
    /// B.
    #[serde(rename = "B")]
    pub b: Interval,
    /// α.
    pub alpha: Interval,
    /// β.
    pub beta: Interval,
    /// Per-budget prediction intervals.
    pub predictions: Vec<PredictionInterval>,
    /// Resamples whose fit succeeded.
    pub resamples: usize,
}

/// Intervals of all three approaches (`None` where no resample succeeded).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BootstrapIntervals {
    /// Approach 1.
    pub approach1: Option<PowerLawIntervals>,
    /// Approach 2.
    pub approach2: Option<PowerLawIntervals>,
    /// Approach 3.
    pub approach3: Option<ParametricIntervals>,
}

/// Linear-interpolated percentile of sorted data, `q` in [0, 1].
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let (i, frac) = (pos.floor() as usize, pos.fract());
    let j = (i + 1).min(sorted.len() - 1);
    sorted[i] * (1.0 - frac) + sorted[j] * frac
}

/// 95% percentile intervals of each column of `samples`.
pub(crate) fn columns(samples: &[Vec<f64>]) -> Vec<Interval> {
    let width = samples.first().map_or(0, Vec::len);
    (0..width)
        .map(|k| {
            let mut col: Vec<f64> = samples.iter().map(|s| s[k]).collect();
            col.sort_by(f64::total_cmp);
            Interval {
                lo: percentile(&col, 0.025),
                hi: percentile(&col, 0.975),
            }
        })
        .collect()
}

fn predictions(iv: &[Interval], computes: &[f64]) -> Vec<PredictionInterval> {
    computes
        .iter()
        .enumerate()
        .map(|(i, &compute)| PredictionInterval {
            compute,
            n_opt: iv[2 * i],
            d_opt: iv[2 * i + 1],
        })
        .collect()
}

pub(crate) fn power_intervals(samples: &[Vec<f64>], computes: &[f64]) -> Option<PowerLawIntervals> {
    if samples.is_empty() {
        return None;
    }
    let iv = columns(samples);
    Some(PowerLawIntervals {
        n_coefficient: iv[0],
        n_exponent: iv[1],
        d_coefficient: iv[2],
        d_exponent: iv[3],
        predictions: predictions(&iv[4..], computes),
        resamples: samples.len(),
    })
}

pub(crate) fn parametric_intervals(
    samples: &[Vec<f64>],
    computes: &[f64],
) -> Option<ParametricIntervals> {
    if samples.is_empty() {
        return None;
    }
    let iv = columns(samples);
    Some(ParametricIntervals {
        e: iv[0],
        a: iv[1],
        b: iv[2],
        alpha: iv[3],
        beta: iv[4],
        predictions: predictions(&iv[5..], computes),
        resamples: samples.len(),
    })
}

//! The Huber-on-log-loss objective of approach 3 over a set of runs, optionally weighted.
//!
//! Σᵢ wᵢ · Huber_δ(LSE(a − α uᵢ, b − β vᵢ, e) − ln Lᵢ), in centred coordinates
//! u = ln N − mean ln N, v = ln D − mean ln D (parameter vector [a', b', e, α, β]).
//! Runs sharing one (N, D) share one design point: the log-sum-exp (three `exp`s and a `ln`)
//! is computed once per point and each run only adds its residual, so a sweep repeated many
//! times costs little more than the sweep. A bootstrap resample is the same data with integer
//! weights ([`HuberProblem::reweighted`]), sharing the points.

use std::collections::HashMap;
use std::sync::Arc;

use crate::data::Run;
use crate::parametric::ParametricLaw;

/// Design points and the runs at each, shared between a problem and its resamples.
#[derive(Debug)]
struct Data {
    /// Centred ln N per distinct (N, D).
    u: Vec<f64>,
    /// Centred ln D per distinct (N, D).
    v: Vec<f64>,
    mean_ln_n: f64,
    mean_ln_d: f64,
    /// Point `p`'s runs are `start[p]..start[p + 1]` of `log_l` / `run`.
    start: Vec<usize>,
    /// ln L per run, grouped by point (input order within a point).
    log_l: Vec<f64>,
    /// The input position of each run.
    run: Vec<u32>,
}

/// Weighted sums over one point's runs: with e = ln L − ȳ, Σw, ȳ, Σw·e, Σw·e², min e, max e.
/// While every residual lies within δ, the point's Huber sum is ½(W d² − 2 d S₁ + S₂) with
/// d = LSE − ȳ, so an evaluation costs O(points) instead of O(runs).
#[derive(Debug, Clone, Copy)]
struct Moments {
    w: f64,
    mean: f64,
    s1: f64,
    s2: f64,
    lo: f64,
    hi: f64,
}

/// The objective over a set of runs. Cheap to clone (the data are shared).
#[derive(Debug, Clone)]
pub struct HuberProblem {
    data: Arc<Data>,
    /// Weight per run (grouped like `Data::log_l`); `None`: every run weight 1.
    weights: Option<Arc<Vec<f64>>>,
    moments: Arc<Vec<Moments>>,
    delta: f64,
}

pub(crate) fn huber(r: f64, delta: f64) -> f64 {
    if r.abs() <= delta {
        0.5 * r * r
    } else {
        delta * (r.abs() - 0.5 * delta)
    }
}

/// Groups runs (point of each, ln L of each) by point, keeping input order within a point.
fn group(u: Vec<f64>, v: Vec<f64>, means: (f64, f64), point: &[u32], log_l: &[f64]) -> Data {
    let mut start = vec![0usize; u.len() + 1];
    for &p in point {
        start[p as usize + 1] += 1;
    }
    for p in 0..u.len() {
        start[p + 1] += start[p];
    }
    let mut next = start.clone();
    let (mut y, mut run) = (vec![0.0; point.len()], vec![0u32; point.len()]);
    for (i, (&p, &l)) in point.iter().zip(log_l).enumerate() {
        let k = &mut next[p as usize];
        y[*k] = l;
        run[*k] = i as u32;
        *k += 1;
    }
    Data {
        u,
        v,
        mean_ln_n: means.0,
        mean_ln_d: means.1,
        start,
        log_l: y,
        run,
    }
}

fn moments(data: &Data, weights: Option<&[f64]>) -> Vec<Moments> {
    let w_of = |k: usize| weights.map_or(1.0, |w| w[k]);
    (0..data.u.len())
        .map(|p| {
            let range = data.start[p]..data.start[p + 1];
            let (mut w, mut wy) = (0.0, 0.0);
            for k in range.clone() {
                w += w_of(k);
                wy += w_of(k) * data.log_l[k];
            }
            let mean = if w > 0.0 { wy / w } else { 0.0 };
            let (mut s1, mut s2) = (0.0, 0.0);
            let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
            for k in range.filter(|&k| w_of(k) > 0.0) {
                let e = data.log_l[k] - mean;
                s1 += w_of(k) * e;
                s2 += w_of(k) * e * e;
                lo = lo.min(e);
                hi = hi.max(e);
            }
            Moments {
                w,
                mean,
                s1,
                s2,
                lo,
                hi,
            }
        })
        .collect()
}

impl HuberProblem {
    /// Builds the problem for `runs` (validated, positive values), every run with weight 1.
    pub fn new(runs: &[Run], delta: f64) -> Self {
        let k = runs.len().max(1) as f64;
        let mean_ln_n = runs.iter().map(|r| r.parameters.ln()).sum::<f64>() / k;
        let mean_ln_d = runs.iter().map(|r| r.tokens().ln()).sum::<f64>() / k;
        let mut index: HashMap<(u64, u64), u32> = HashMap::new();
        let (mut u, mut v) = (Vec::new(), Vec::new());
        let point: Vec<u32> = runs
            .iter()
            .map(|r| {
                let key = (r.parameters.to_bits(), r.compute_budget.to_bits());
                *index.entry(key).or_insert_with(|| {
                    u.push(r.parameters.ln() - mean_ln_n);
                    v.push(r.tokens().ln() - mean_ln_d);
                    (u.len() - 1) as u32
                })
            })
            .collect();
        let log_l: Vec<f64> = runs.iter().map(|r| r.final_loss.ln()).collect();
        let data = group(u, v, (mean_ln_n, mean_ln_d), &point, &log_l);
        HuberProblem {
            moments: Arc::new(moments(&data, None)),
            data: Arc::new(data),
            weights: None,
            delta,
        }
    }

    /// Number of runs (before weighting).
    pub fn runs(&self) -> usize {
        self.data.log_l.len()
    }

    /// Number of distinct (N, D) design points.
    pub fn points(&self) -> usize {
        self.data.u.len()
    }

    /// The same runs with run `i` (input position) counted `counts[i]` times (a bootstrap
    /// resample); runs beyond `counts` get weight 0.
    pub fn reweighted(&self, counts: &[u32]) -> Self {
        let w: Vec<f64> = self
            .data
            .run
            .iter()
            .map(|&i| counts.get(i as usize).map_or(0.0, |&c| c as f64))
            .collect();
        HuberProblem {
            moments: Arc::new(moments(&self.data, Some(&w))),
            weights: Some(Arc::new(w)),
            ..self.clone()
        }
    }

    /// A smaller problem of at most `max_runs` terms for choosing starting points: one term
    /// per design point (its mean ln L, weighted by its run count), and if there are more
    /// points than `max_runs`, every k-th point. `None` when the problem is already that small.
    pub fn coarse(&self, max_runs: usize) -> Option<Self> {
        if self.runs() <= max_runs || self.weights.is_some() {
            return None;
        }
        let stride = self.points().div_ceil(max_runs.max(1));
        let keep: Vec<usize> = (0..self.points()).step_by(stride).collect();
        let d = &*self.data;
        let data = group(
            keep.iter().map(|&p| d.u[p]).collect(),
            keep.iter().map(|&p| d.v[p]).collect(),
            (d.mean_ln_n, d.mean_ln_d),
            &(0..keep.len() as u32).collect::<Vec<_>>(),
            &keep
                .iter()
                .map(|&p| self.moments[p].mean)
                .collect::<Vec<_>>(),
        );
        let w: Vec<f64> = keep.iter().map(|&p| self.moments[p].w).collect();
        Some(HuberProblem {
            moments: Arc::new(moments(&data, Some(&w))),
            data: Arc::new(data),
            weights: Some(Arc::new(w)),
            delta: self.delta,
        })
    }

    /// Converts a law to the internal parameter vector.
    pub fn to_params(&self, law: &ParametricLaw) -> Vec<f64> {
        vec![
            law.a.ln() - law.alpha * self.data.mean_ln_n,
            law.b.ln() - law.beta * self.data.mean_ln_d,
            law.e.ln(),
            law.alpha,
            law.beta,
        ]
    }

    /// Converts an internal parameter vector (a', b', e, α, β) back to a law.
    pub fn to_law(&self, p: &[f64]) -> ParametricLaw {
        ParametricLaw {
            a: (p[0] + p[3] * self.data.mean_ln_n).exp(),
            b: (p[1] + p[4] * self.data.mean_ln_d).exp(),
            e: p[2].exp(),
            alpha: p[3],
            beta: p[4],
        }
    }

    /// Per design point: (log-sum-exp, exp terms x1, x2, x3 relative to the max, their sum).
    fn point_terms(&self, p: &[f64]) -> Vec<[f64; 5]> {
        let (a, b, e, alpha, beta) = (p[0], p[1], p[2], p[3], p[4]);
        let d = &*self.data;
        d.u.iter()
            .zip(&d.v)
            .map(|(&u, &v)| {
                let t1 = a - alpha * u;
                let t2 = b - beta * v;
                let m = t1.max(t2).max(e);
                let (x1, x2, x3) = ((t1 - m).exp(), (t2 - m).exp(), (e - m).exp());
                let s = x1 + x2 + x3;
                [m + s.ln(), x1, x2, x3, s]
            })
            .collect()
    }

    /// Point `p`'s weighted Huber sum and sum of clamped residuals at log-sum-exp `lse`.
    fn point_sums(&self, p: usize, lse: f64) -> (f64, f64) {
        let (m, delta) = (&self.moments[p], self.delta);
        let d = lse - m.mean;
        if d - m.hi >= -delta && d - m.lo <= delta {
            return (0.5 * (m.w * d * d - 2.0 * d * m.s1 + m.s2), m.w * d - m.s1);
        }
        let data = &*self.data;
        let (mut h, mut c) = (0.0, 0.0);
        for k in data.start[p]..data.start[p + 1] {
            let w = self.weights.as_ref().map_or(1.0, |w| w[k]);
            if w > 0.0 {
                let r = lse - data.log_l[k];
                h += w * huber(r, delta);
                c += w * r.clamp(-delta, delta);
            }
        }
        (h, c)
    }

    /// Objective at `p`; adds its gradient into `grad` if given.
    pub fn eval(&self, p: &[f64], grad: Option<&mut [f64; 5]>) -> f64 {
        let terms = self.point_terms(p);
        let mut total = 0.0;
        let mut g = [0.0; 5];
        for (k, t) in terms.iter().enumerate() {
            if self.moments[k].w <= 0.0 {
                continue;
            }
            let (h_sum, c_sum) = self.point_sums(k, t[0]);
            total += h_sum;
            // Chain rule once per point.
            let h = c_sum / t[4];
            g[0] += h * t[1];
            g[1] += h * t[2];
            g[2] += h * t[3];
            g[3] -= h * t[1] * self.data.u[k];
            g[4] -= h * t[2] * self.data.v[k];
        }
        if let Some(out) = grad {
            for (o, x) in out.iter_mut().zip(g) {
                *o += x;
            }
        }
        total
    }

    /// Ordinary residual statistics at `p`: (Huber sum, RMSE of ln L), weighted.
    pub fn goodness(&self, p: &[f64]) -> (f64, f64) {
        let huber_sum = self.eval(p, None);
        let terms = self.point_terms(p);
        let (mut sq, mut n) = (0.0, 0.0);
        for (t, m) in terms.iter().zip(self.moments.iter()) {
            if m.w > 0.0 {
                let d = t[0] - m.mean;
                sq += m.w * d * d - 2.0 * d * m.s1 + m.s2;
                n += m.w;
            }
        }
        (huber_sum, (sq / f64::max(n, 1.0)).sqrt())
    }
}

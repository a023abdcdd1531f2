//! Where an overlapped DDP step loses its time, from two Chrome traces of `bench ddp
//! --trace-dir`: a base step whose backward runs with no communication beside it (naive:
//! its collectives come after the backward) and a strategy's step. Stage by stage (the
//! same names in both), the strategy's extra time is put with the stages during which a
//! collective ran ("busy") or the others ("idle"); then the wait for gradients after the
//! backward and the optimizer. Busy stages slowed down and idle ones not: the collectives
//! take compute's resources (SMs, memory bandwidth). Both slowed alike: something
//! global, such as the clock.
//!
//!   bench slowdown --base trace-xl-fp32-naive.json trace-xl-fp32-bucketed-1.json ...

use crate::trace::{union, Lane, Span};
use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::path::Path;

/// A stage counts as busy when collectives ran during at least this share of it.
pub const BUSY: f64 = 0.05;

/// Spans of one rank's step read back from [`crate::trace::chrome_trace`]'s JSON.
pub fn from_chrome(v: &Value) -> Result<Vec<Span>> {
    let ev = v["traceEvents"]
        .as_array()
        .context("no traceEvents array")?;
    let mut out = Vec::new();
    for e in ev.iter().filter(|e| e["ph"] == "X") {
        let Some(lane) = e["cat"].as_str().and_then(Lane::from_cat) else {
            bail!(
                "event {} has an unknown category {:?}",
                e["name"],
                e["cat"].as_str()
            );
        };
        let (ts, dur) = match (e["ts"].as_f64(), e["dur"].as_f64()) {
            (Some(t), Some(d)) if d >= 0.0 => (t, d),
            _ => bail!("event {} has no ts/dur", e["name"]),
        };
        out.push(Span {
            name: e["name"].as_str().unwrap_or_default().to_string(),
            lane,
            start_ms: ts / 1e3,
            end_ms: (ts + dur) / 1e3,
            bytes: e["args"]["bytes"].as_u64().map(|b| b as usize),
        });
    }
    Ok(out)
}

/// Reads one trace file.
pub fn load(path: &Path) -> Result<Vec<Span>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let v: Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    from_chrome(&v).with_context(|| format!("{} is not a bench ddp trace", path.display()))
}

/// A strategy's traced step against the base step, in milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Breakdown {
    pub base_step_ms: f64,
    pub step_ms: f64,
    /// Backward stages (the first, which includes the forward, apart) with collectives
    /// beside them, and their time over the base's same stages.
    pub busy_stages: usize,
    pub busy_extra_ms: f64,
    pub idle_stages: usize,
    pub idle_extra_ms: f64,
    /// The forward + last stage's backward, over the base's.
    pub first_extra_ms: f64,
    /// Waiting for gradients after the backward, and the optimizer, over the base's.
    pub wait_extra_ms: f64,
    pub optimizer_extra_ms: f64,
    /// Milliseconds during which a collective ran beside the busy stages.
    pub comm_beside_ms: f64,
}

impl Breakdown {
    /// Compute lost per millisecond of communication beside it.
    pub fn lost_per_comm_ms(&self) -> f64 {
        if self.comm_beside_ms > 0.0 {
            self.busy_extra_ms / self.comm_beside_ms
        } else {
            0.0
        }
    }
}

/// When the step's last compute (or wait) span ends.
pub fn step_ms(spans: &[Span]) -> f64 {
    let compute = spans.iter().filter(|s| s.lane != Lane::Comm);
    compute.map(|s| s.end_ms).fold(0.0, f64::max)
}

/// Compares `other` with `base` stage by stage; an error names a stage `base` lacks.
pub fn breakdown(base: &[Span], other: &[Span]) -> Result<Breakdown> {
    let comm = union(other, Lane::Comm);
    let mut b = Breakdown {
        base_step_ms: step_ms(base),
        step_ms: step_ms(other),
        busy_stages: 0,
        busy_extra_ms: 0.0,
        idle_stages: 0,
        idle_extra_ms: 0.0,
        first_extra_ms: 0.0,
        wait_extra_ms: 0.0,
        optimizer_extra_ms: 0.0,
        comm_beside_ms: 0.0,
    };
    for s in other.iter().filter(|s| s.lane != Lane::Comm) {
        let Some(twin) = base.iter().find(|t| t.lane == s.lane && t.name == s.name) else {
            bail!("the base trace has no span {:?}", s.name);
        };
        let dur = s.end_ms - s.start_ms;
        let extra = dur - (twin.end_ms - twin.start_ms);
        if s.lane == Lane::Wait {
            b.wait_extra_ms += extra;
        } else if s.name == "optimizer" {
            b.optimizer_extra_ms += extra;
        } else if s.name.starts_with("forward") {
            b.first_extra_ms += extra;
        } else {
            let beside: f64 = comm
                .iter()
                .map(|&(a, e)| (e.min(s.end_ms) - a.max(s.start_ms)).max(0.0))
                .sum();
            if dur > 0.0 && beside / dur >= BUSY {
                b.busy_stages += 1;
                b.busy_extra_ms += extra;
                b.comm_beside_ms += beside;
            } else {
                b.idle_stages += 1;
                b.idle_extra_ms += extra;
            }
        }
    }
    Ok(b)
}

pub fn header() -> String {
    format!(
        "{:<34} {:>9} {:>9} {:>11} {:>11} {:>10} {:>9} {:>8} {:>10} {:>8}",
        "trace",
        "base(ms)",
        "step(ms)",
        "busy:n/ms",
        "idle:n/ms",
        "fwd+last",
        "wait",
        "optim",
        "comm beside",
        "lost/comm"
    )
}

pub fn row(name: &str, b: &Breakdown) -> String {
    format!(
        "{:<34} {:>9.1} {:>9.1} {:>11} {:>11} {:>10.2} {:>9.2} {:>8.2} {:>10.1} {:>8.3}",
        name,
        b.base_step_ms,
        b.step_ms,
        format!("{}/{:.2}", b.busy_stages, b.busy_extra_ms),
        format!("{}/{:.2}", b.idle_stages, b.idle_extra_ms),
        b.first_extra_ms,
        b.wait_extra_ms,
        b.optimizer_extra_ms,
        b.comm_beside_ms,
        b.lost_per_comm_ms()
    )
}

#[cfg(test)]
#[path = "slowdown_tests.rs"]
pub(crate) mod tests;

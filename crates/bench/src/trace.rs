//! One traced DDP step: compute and communication spans from a [`comm::Timeline`], the
//! Chrome trace JSON that Perfetto opens, and the overlap ratio as Holistic Trace
//! Analysis defines it (time computing while communicating ÷ time communicating).
//!
//! Compute spans come from marks on the compute stream: the step starts at the
//! timeline's origin, `bwd{s}` is reached when stage `s`'s backward has been queued,
//! `synced` after `finish_gradient_synchronization`, `step` after the optimizer. The span
//! from the last backward to `synced` is the compute stream *waiting* for gradients; it is
//! traced but not counted as compute.

use comm::Timeline;
use serde_json::{json, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    Compute,
    Wait,
    Comm,
}

impl Lane {
    const ALL: [Lane; 3] = [Lane::Compute, Lane::Wait, Lane::Comm];

    /// The lane's category in the Chrome trace.
    pub fn cat(self) -> &'static str {
        match self {
            Lane::Compute => "compute",
            Lane::Wait => "wait",
            Lane::Comm => "comm",
        }
    }

    /// The lane of a Chrome trace category ([`Lane::cat`] read back).
    pub fn from_cat(cat: &str) -> Option<Lane> {
        Lane::ALL.into_iter().find(|l| l.cat() == cat)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub name: String,
    pub lane: Lane,
    pub start_ms: f64,
    pub end_ms: f64,
    pub bytes: Option<usize>,
}

fn at(t: &Timeline, label: &str) -> Option<f64> {
    t.marks.iter().find(|m| m.label == label).map(|m| m.at_ms)
}

/// Spans of one step of a model with `stages` stages (marks as in the module docs).
pub fn spans(t: &Timeline, stages: usize) -> Vec<Span> {
    let mut out = Vec::new();
    let mut push = |name: String, lane, a: Option<f64>, b: Option<f64>| {
        if let (Some(a), Some(b)) = (a, b) {
            out.push(Span {
                name,
                lane,
                start_ms: a,
                end_ms: b.max(a),
                bytes: None,
            });
        }
    };
    let mut prev = Some(0.0);
    for s in (0..stages).rev() {
        let end = at(t, &format!("bwd{s}"));
        let name = if s + 1 == stages {
            format!("forward + backward stage {s}")
        } else {
            format!("backward stage {s}")
        };
        push(name, Lane::Compute, prev, end);
        prev = end.or(prev);
    }
    let synced = at(t, "synced");
    push("wait for gradients".into(), Lane::Wait, prev, synced);
    push("optimizer".into(), Lane::Compute, synced, at(t, "step"));
    for c in &t.collectives {
        out.push(Span {
            name: c.op.to_string(),
            lane: Lane::Comm,
            start_ms: c.start_ms,
            end_ms: c.end_ms,
            bytes: Some(c.bytes),
        });
    }
    out
}

/// Sorted, merged intervals of one lane.
pub fn union(spans: &[Span], lane: Lane) -> Vec<(f64, f64)> {
    let mut v: Vec<(f64, f64)> = spans
        .iter()
        .filter(|s| s.lane == lane && s.end_ms > s.start_ms)
        .map(|s| (s.start_ms, s.end_ms))
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (a, b) in v {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// Milliseconds of communication, and of communication during which compute ran.
pub fn comm_and_overlap_ms(spans: &[Span]) -> (f64, f64) {
    let (comp, comm) = (union(spans, Lane::Compute), union(spans, Lane::Comm));
    let total: f64 = comm.iter().map(|(a, b)| b - a).sum();
    let mut both = 0.0;
    for &(a, b) in &comm {
        for &(c, d) in &comp {
            both += (b.min(d) - a.max(c)).max(0.0);
        }
    }
    (total, both)
}

/// Compute time during communication ÷ communication time (0 when nothing communicates).
pub fn overlap_ratio(spans: &[Span]) -> f64 {
    let (total, both) = comm_and_overlap_ms(spans);
    if total > 0.0 {
        both / total
    } else {
        0.0
    }
}

/// The Chrome trace event format (complete events, microseconds), one process per rank,
/// one thread per lane.
pub fn chrome_trace(spans: &[Span], rank: usize, title: &str) -> Value {
    let tid = |l: Lane| match l {
        Lane::Compute | Lane::Wait => 1,
        Lane::Comm => 2,
    };
    let mut ev = vec![
        json!({"ph": "M", "name": "process_name", "pid": rank, "args": {"name": format!("rank {rank}: {title}")}}),
        json!({"ph": "M", "name": "thread_name", "pid": rank, "tid": 1, "args": {"name": "compute stream"}}),
        json!({"ph": "M", "name": "thread_name", "pid": rank, "tid": 2, "args": {"name": "communication stream"}}),
    ];
    for s in spans {
        let mut e = json!({
            "name": s.name, "ph": "X", "pid": rank, "tid": tid(s.lane),
            "cat": s.lane.cat(),
            "ts": s.start_ms * 1e3, "dur": (s.end_ms - s.start_ms) * 1e3,
        });
        if let Some(b) = s.bytes {
            e["args"] = json!({ "bytes": b });
        }
        ev.push(e);
    }
    json!({ "traceEvents": ev, "displayTimeUnit": "ms" })
}

#[cfg(test)]
mod tests {
    use super::*;
    use comm::{CollectiveSpan, Mark};

    fn mark(label: &str, at_ms: f64) -> Mark {
        Mark {
            label: label.into(),
            at_ms,
        }
    }

    fn timeline(colls: &[(f64, f64)]) -> Timeline {
        Timeline {
            marks: vec![
                mark("bwd1", 10.0),
                mark("bwd0", 20.0),
                mark("synced", 30.0),
                mark("step", 35.0),
            ],
            collectives: colls
                .iter()
                .map(|&(a, b)| CollectiveSpan {
                    op: "all_reduce",
                    bytes: 4,
                    start_ms: a,
                    end_ms: b,
                })
                .collect(),
        }
    }

    #[test]
    fn spans_follow_the_marks() {
        let s = spans(&timeline(&[]), 2);
        let names: Vec<_> = s
            .iter()
            .map(|s| (s.name.as_str(), s.start_ms, s.end_ms))
            .collect();
        assert_eq!(
            names,
            vec![
                ("forward + backward stage 1", 0.0, 10.0),
                ("backward stage 0", 10.0, 20.0),
                ("wait for gradients", 20.0, 30.0),
                ("optimizer", 30.0, 35.0),
            ]
        );
    }

    #[test]
    fn naive_after_backward_does_not_overlap() {
        // Communication between the last backward and the optimizer: the wait is not compute.
        let s = spans(&timeline(&[(20.0, 25.0), (25.0, 30.0)]), 2);
        assert_eq!(overlap_ratio(&s), 0.0);
    }

    #[test]
    fn overlap_counts_compute_during_communication_once() {
        // 10..14 entirely under backward stage 0 (4 ms); 18..26 has 2 ms under compute and
        // 6 in the wait; the second collective inside 10..14 must not count twice.
        let s = spans(&timeline(&[(10.0, 14.0), (12.0, 14.0), (18.0, 26.0)]), 2);
        let (total, both) = comm_and_overlap_ms(&s);
        assert!((total - 12.0).abs() < 1e-9, "{total}");
        assert!((both - 6.0).abs() < 1e-9, "{both}");
        assert!((overlap_ratio(&s) - 0.5).abs() < 1e-9);
    }

    #[test]
    fn chrome_trace_has_complete_events_in_microseconds() {
        let s = spans(&timeline(&[(12.0, 14.0)]), 2);
        let v = chrome_trace(&s, 0, "xl fp32 overlap");
        let ev = v["traceEvents"].as_array().unwrap();
        let comm = ev.iter().find(|e| e["cat"] == "comm").unwrap();
        assert_eq!(comm["ph"], "X");
        assert_eq!(comm["ts"], 12000.0);
        assert_eq!(comm["dur"], 2000.0);
        assert_eq!(comm["tid"], 2);
        assert_eq!(comm["args"]["bytes"], 4);
    }
}

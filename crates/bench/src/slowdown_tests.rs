use super::*;
use crate::trace::chrome_trace;

/// A span of `lane` from `a` to `b` ms (collectives carry 8 bytes).
pub(crate) fn span(name: &str, lane: Lane, a: f64, b: f64) -> Span {
    Span {
        name: name.into(),
        lane,
        start_ms: a,
        end_ms: b,
        bytes: (lane == Lane::Comm).then_some(8),
    }
}

/// Three stages, the wait and the optimizer, starting at the given marks.
fn step(m: [f64; 6]) -> Vec<Span> {
    vec![
        span("forward + backward stage 2", Lane::Compute, m[0], m[1]),
        span("backward stage 1", Lane::Compute, m[1], m[2]),
        span("backward stage 0", Lane::Compute, m[2], m[3]),
        span("wait for gradients", Lane::Wait, m[3], m[4]),
        span("optimizer", Lane::Compute, m[4], m[5]),
    ]
}

#[test]
fn extra_time_goes_to_busy_and_idle_stages_the_wait_and_the_optimizer() {
    let base = step([0.0, 10.0, 14.0, 18.0, 19.0, 21.0]);
    let mut other = step([0.0, 10.5, 15.5, 19.5, 21.0, 23.0]);
    // Stage 1 (10.5..15.5) runs beside 4 ms of collectives (two overlapping, counted
    // once); stage 0 has 0.1 ms (2.5 %, under the busy share) beside it.
    other.push(span("all_reduce", Lane::Comm, 11.0, 14.0));
    other.push(span("all_reduce", Lane::Comm, 13.0, 15.0));
    other.push(span("all_reduce", Lane::Comm, 15.5, 15.6));
    let b = breakdown(&base, &other).unwrap();
    assert_eq!((b.base_step_ms, b.step_ms), (21.0, 23.0));
    assert_eq!((b.busy_stages, b.idle_stages), (1, 1));
    assert!((b.busy_extra_ms - 1.0).abs() < 1e-9, "{b:?}");
    assert!(b.idle_extra_ms.abs() < 1e-9, "{b:?}");
    assert!((b.first_extra_ms - 0.5).abs() < 1e-9, "{b:?}");
    assert!((b.wait_extra_ms - 0.5).abs() < 1e-9, "{b:?}");
    assert!(b.optimizer_extra_ms.abs() < 1e-9, "{b:?}");
    assert!((b.comm_beside_ms - 4.0).abs() < 1e-9, "{b:?}");
    assert!((b.lost_per_comm_ms() - 0.25).abs() < 1e-9);
    // The parts add up to the step's difference.
    let parts = b.busy_extra_ms + b.idle_extra_ms + b.first_extra_ms + b.wait_extra_ms;
    assert!((parts + b.optimizer_extra_ms - (b.step_ms - b.base_step_ms)).abs() < 1e-9);
    assert!(row("x", &b).contains("1/1.00"), "{}", row("x", &b));
}

#[test]
fn a_chrome_trace_reads_back_as_its_spans() {
    let mut s = step([0.0, 10.0, 14.0, 18.0, 19.0, 21.0]);
    s.push(span("all_reduce", Lane::Comm, 11.0, 14.0));
    let back = from_chrome(&chrome_trace(&s, 0, "t")).unwrap();
    assert_eq!(back, s);
}

#[test]
fn a_stage_the_base_lacks_or_an_unknown_event_is_an_error_naming_it() {
    let base = step([0.0, 10.0, 14.0, 18.0, 19.0, 21.0]);
    let mut other = base.clone();
    other.push(span("backward stage 7", Lane::Compute, 21.0, 22.0));
    let e = breakdown(&base, &other).unwrap_err().to_string();
    assert!(e.contains("backward stage 7"), "{e}");
    let v = serde_json::json!({"traceEvents": [
        {"ph": "X", "name": "kernel", "cat": "gpu", "ts": 0.0, "dur": 1.0}
    ]});
    let e = from_chrome(&v).unwrap_err().to_string();
    assert!(e.contains("kernel") && e.contains("gpu"), "{e}");
    let e = from_chrome(&serde_json::json!({})).unwrap_err().to_string();
    assert!(e.contains("traceEvents"), "{e}");
}

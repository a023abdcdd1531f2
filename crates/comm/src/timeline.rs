//! Timelines: when each collective ran on the communication stream and when the caller's
//! labelled marks were reached on the compute stream, in milliseconds on one time base
//! (an origin recorded on the compute stream when the timeline started).
//!
//! Backends fill these from device events (NCCL: CUDA events with timing); the types are
//! plain data so that traces and overlap analysis build without a GPU.

/// One collective as the communication stream ran it.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectiveSpan {
    /// "all_reduce", "reduce_scatter", "all_gather", "broadcast".
    pub op: &'static str,
    /// Bytes of the larger of the collective's buffers.
    pub bytes: usize,
    pub start_ms: f64,
    pub end_ms: f64,
}

/// A point the compute stream reached, labelled by the caller.
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    pub label: String,
    pub at_ms: f64,
}

/// Everything recorded between starting a timeline and taking it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    pub marks: Vec<Mark>,
    pub collectives: Vec<CollectiveSpan>,
}

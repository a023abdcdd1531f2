//! Whether a CUDA stream is being captured into a graph (the fused AdamW's scalar upload
//! must not wait on the host then; `model::graph` captures whole steps).

/// Whether `stream` is being captured now. Asked of the driver directly: cudarc's
/// `capture_status` first takes (and returns) any error its context recorded from a drop,
/// which would read as "not capturing" and lose that error.
#[cfg(feature = "cuda")]
pub fn capturing_stream(stream: &candle_core::cuda_backend::cudarc::driver::CudaStream) -> bool {
    use candle_core::cuda_backend::cudarc::driver::{result, sys::CUstreamCaptureStatus as S};
    // SAFETY: a query on a live stream.
    matches!(unsafe { result::stream::is_capturing(stream.cu_stream()) },
        Ok(s) if s != S::CU_STREAM_CAPTURE_STATUS_NONE)
}

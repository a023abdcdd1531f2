//! Whether a CUDA stream is being captured into a graph (the fused AdamW's scalar upload
//! must not wait on the host then; `model::graph` captures whole steps).

/// Whether `stream` is being captured now.
#[cfg(feature = "cuda")]
pub fn capturing_stream(stream: &candle_core::cuda_backend::cudarc::driver::CudaStream) -> bool {
    use candle_core::cuda_backend::cudarc::driver::sys::CUstreamCaptureStatus as S;
    matches!(stream.capture_status(), Ok(s) if s != S::CU_STREAM_CAPTURE_STATUS_NONE)
}

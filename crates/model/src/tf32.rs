//! TF32 for fp32 GEMMs, opt in (PyTorch's `torch.backends.cuda.matmul.allow_tf32`).
//!
//! With it on, cuBLAS computes the fp32 GEMMs queued from then on with TF32 tensor cores
//! (`CUBLAS_COMPUTE_32F_FAST_TF32`: 10-bit mantissa products, fp32 accumulation); inputs,
//! outputs and every other op stay fp32. It is process-wide (candle's switch), off by
//! default, and a no-op on the CPU and for bf16 GEMMs.
//!
//! ```
//! model::tf32::set_tf32(true); // fp32 matmuls on tensor cores from here on
//! assert!(model::tf32::tf32());
//! model::tf32::set_tf32(false); // exact fp32 again
//! ```

use std::sync::atomic::{AtomicBool, Ordering};

/// What was asked for: candle's CPU-only dummy answers `true` whatever was set.
static ON: AtomicBool = AtomicBool::new(false);

/// Turns TF32 for fp32 GEMMs on or off for the whole process.
pub fn set_tf32(on: bool) {
    ON.store(on, Ordering::Relaxed);
    candle_core::cuda::set_gemm_reduced_precision_f32(on);
}

/// Whether TF32 was turned on for fp32 GEMMs (what records name).
pub fn tf32() -> bool {
    ON.load(Ordering::Relaxed)
}

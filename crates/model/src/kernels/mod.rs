//! Fused ops with backward passes, as candle `CustomOp`s: one CUDA kernel per direction
//! (kernels/fused.cu, f32 and bf16 computed in f32) and an f32 CPU implementation that CI
//! tests against the differentiable composition of plain ops ([`crate::layers`]).
//!
//! How to use: call the functions, not the ops; each takes the same tensors as its
//! composition in [`crate::layers`] and falls back to it where the fused op has no
//! implementation (CPU with a dtype other than f32):
//! ```
//! # fn main() -> model::Result<()> {
//! use candle_core::{Device, Tensor};
//! let s = Tensor::randn(0f32, 1., (2, 3, 4, 4), &Device::Cpu)?;
//! let p = model::kernels::causal_softmax(&s, 0.5)?; // softmax(0.5·s), keys after the query masked
//! # let _ = p; Ok(()) }
//! ```
//! [`check`] compares every op with its composition (values and gradients) on any device:
//! CI runs it on the CPU, `bench model-check` on the GPU.

pub(crate) mod attn;
#[cfg(feature = "cuda")]
mod attn_geometry;
mod cast;
pub mod check;
pub(crate) mod embed;
#[cfg(feature = "cuda")]
pub(crate) mod gpu;
mod layout;
#[cfg(feature = "cuda")]
pub(crate) mod norm_bwd;
mod qkv;
mod rope;
mod softmax;
mod swiglu;
pub(crate) mod xent;

pub use cast::to_bf16;
pub use embed::embedding;
pub use layout::{add, swap12, transpose};
pub use qkv::{qkv_rope, qkv_rope_bwd, qkv_rope_composed};
pub use rope::{rope, rope_bwd};
pub use softmax::{causal_softmax, causal_softmax_bwd};
pub use swiglu::{silu_mul, silu_mul_bwd};
pub use xent::cross_entropy;

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, Layout};

/// The f32 elements of a contiguous CPU input, or an error naming the op and input.
pub(crate) fn f32s<'a>(
    op: &str,
    what: &str,
    s: &'a CpuStorage,
    l: &Layout,
) -> candle_core::Result<&'a [f32]> {
    if !l.is_contiguous() {
        candle_core::bail!("{op}: {what} must be contiguous");
    }
    match s {
        CpuStorage::F32(v) => Ok(&v[l.start_offset()..l.start_offset() + l.shape().elem_count()]),
        _ => candle_core::bail!("{op}: {what} must be f32 on the CPU, got {:?}", s.dtype()),
    }
}

/// The u32 elements of a CPU index input (`noun`s: targets, token ids), each below
/// `bound`, or an error naming the op and the first one out of range (`unit`: what the
/// bound counts).
pub(crate) fn u32s_below<'a>(
    op: &str,
    noun: &str,
    s: &'a CpuStorage,
    l: &Layout,
    bound: usize,
    unit: &str,
) -> candle_core::Result<&'a [u32]> {
    let CpuStorage::U32(v) = s else {
        candle_core::bail!("{op}: {noun}s must be u32, got {:?}", s.dtype())
    };
    let t = &v[l.start_offset()..l.start_offset() + l.shape().elem_count()];
    if let Some(bad) = t.iter().find(|&&x| x as usize >= bound) {
        candle_core::bail!("{op}: {noun} {bad} is out of range for {bound} {unit}");
    }
    Ok(t)
}

/// The CPU side of an op whose kernel exists on CUDA only (its caller falls back to
/// candle's ops elsewhere, so reaching this is a bug in the caller).
pub(crate) fn cuda_only<T>(op: &str) -> candle_core::Result<T> {
    candle_core::bail!("{op}: the kernel runs on CUDA only (the caller falls back)")
}

/// Checks that a CUDA input is contiguous (the kernels index densely).
#[cfg(feature = "cuda")]
pub(crate) fn dense(op: &str, what: &str, l: &Layout) -> candle_core::Result<()> {
    if !l.is_contiguous() {
        candle_core::bail!("{op}: {what} must be contiguous");
    }
    Ok(())
}

/// Threads per block for the element-wise kernels.
#[cfg(feature = "cuda")]
pub(crate) const BLOCK: usize = 256;

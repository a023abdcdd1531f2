//! The block's GEMMs: `a · b (+ c)` on 2-D matrices, through cuBLASLt on CUDA with the
//! residual add in the GEMM's epilogue (β = 1, C ≠ D) and each shape's algorithm chosen
//! by timing cuBLASLt's heuristic candidates once (as PyTorch's TunableOp or
//! `max-autotune` do); candle's `matmul` (+ add) elsewhere.
//!
//! How to use (the same call on the CPU, where it is candle's ops):
//! ```
//! # fn main() -> model::Result<()> {
//! use candle_core::{Device, Tensor};
//! let dev = Device::Cpu;
//! let x = Tensor::randn(0f32, 1., (4, 3), &dev)?;
//! let w = Tensor::randn(0f32, 1., (5, 3), &dev)?;
//! let r = Tensor::randn(0f32, 1., (4, 5), &dev)?;
//! let y = model::gemm::linear(&x, &w, Some(&r))?; // x · wᵀ + r
//! let z = model::gemm::matmul(&y, &w, None)?; // y · w
//! # let _ = z; Ok(()) }
//! ```
//! Operands may be contiguous or the transpose of a contiguous matrix (`.t()`), as the
//! hand-written backward passes them; anything else is made contiguous first.
//!
//! Tuning: the first call of a shape (outside CUDA-graph capture) times up to
//! 16 (`tune::CANDIDATES`) algorithms, each as a CUDA graph replays it (cuBLASLt's memset
//! before some kernels costs µs there, not in a stream: `tune`'s docs), and keeps the
//! fastest for the process; during capture an untuned shape takes cuBLASLt's first
//! heuristic. `MODEL_GEMM_TUNE=0` turns timing off (the first heuristic everywhere: the
//! same algorithm on every run); `MODEL_GEMM_TUNE=stream` times in the stream. [`tuned`]
//! lists what was timed. Timing noise can make two processes choose differently, and two
//! algorithms round differently: [`choices`] is the process's table (a candidate index per
//! shape) and [`set_choices`] restores one, so that a resumed or repeated run computes the
//! same bits (`train` keeps it in its run directory, as PyTorch's TunableOp keeps its file).
//! A table holds for one GPU model and cuBLASLt version ([`identity`]). A GEMM queued
//! while `seam::gemm_sms` leaves SMs out has a plan of its own, with cuBLASLt's SM count
//! target set to the SMs left (its choice is a row of its own, `sms` in the file). The
//! arithmetic is the dtype's: f32 stays f32 (TF32 only when [`crate::tf32`] is on), bf16
//! accumulates in f32 and rounds once, after the add.

#[cfg(feature = "cuda")]
mod choices;
#[cfg(feature = "cuda")]
mod lt;
#[cfg(feature = "cuda")]
mod op;
mod table;
#[cfg(feature = "cuda")]
mod tune;

pub use table::Table;

use crate::error::Result;
#[cfg(feature = "cuda")]
use candle_core::DType;
use candle_core::Tensor;

/// One tuned shape: what the timing found.
#[derive(Debug, Clone)]
pub struct Tuned {
    /// D (m × n) = A (m × k) · B (k × n), row-major.
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub dtype: String,
    /// With the add (β = 1).
    pub add: bool,
    /// Candidates timed.
    pub candidates: usize,
    /// Time of cuBLASLt's first heuristic and of the chosen algorithm, microseconds.
    pub first_us: f64,
    pub best_us: f64,
}

/// One shape's algorithm: the index of the chosen candidate in cuBLASLt's heuristic list
/// for the shape (the same list on the same GPU model and cuBLASLt version). Serialized
/// as it is in a [`Table`]'s file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Choice {
    /// D (m × n) = A (m × k) · B (k × n), row-major.
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// A and B as transposed views.
    pub ta: bool,
    pub tb: bool,
    /// "bf16", "tf32" or "f32".
    pub dtype: String,
    /// With the add (β = 1).
    pub add: bool,
    /// The SM count the plan targets (`seam::gemm_sms`; 0, left out of the file: every SM).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sms: u32,
    pub index: usize,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The process's GEMM choices so far, sorted by shape (empty without CUDA).
pub fn choices() -> Vec<Choice> {
    #[cfg(feature = "cuda")]
    return choices::choices();
    #[cfg(not(feature = "cuda"))]
    Vec::new()
}

/// Takes `table` as the process's choices: its shapes are not timed again (plans already
/// made keep theirs). A dtype other than bf16, tf32 and f32 is refused, naming the shape.
pub fn set_choices(table: &[Choice]) -> Result<()> {
    #[cfg(feature = "cuda")]
    choices::set_choices(table)?;
    #[cfg(not(feature = "cuda"))]
    let _ = table;
    Ok(())
}

/// Where a table of choices holds: the GPU's name and cuBLASLt's version; `None` off CUDA.
pub fn identity(dev: &candle_core::Device) -> Result<Option<String>> {
    match dev {
        #[cfg(feature = "cuda")]
        candle_core::Device::Cuda(d) => Ok(Some(choices::identity(d)?)),
        _ => Ok(None),
    }
}

/// The shapes tuned so far in this process (empty without CUDA).
pub fn tuned() -> Vec<Tuned> {
    #[cfg(feature = "cuda")]
    return lt::tuned();
    #[cfg(not(feature = "cuda"))]
    Vec::new()
}

/// Whether a 2-D layout is a contiguous matrix (a single row or column is one).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn plain(dims: &[usize], stride: &[usize]) -> bool {
    matches!((dims, stride), ([r, c], [s0, 1]) if *s0 == *c || *r == 1)
}

/// Whether a 2-D layout is a contiguous matrix or the transpose of one.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn plain_or_transposed(dims: &[usize], stride: &[usize]) -> bool {
    plain(dims, stride) || matches!((dims, stride), ([r, _], [1, s1]) if *s1 == *r)
}

/// Whether cuBLASLt can read `t` as it is: f32 or bf16 on CUDA, a plain or transposed matrix.
#[cfg(feature = "cuda")]
fn lt_ok(t: &Tensor) -> bool {
    let l = t.layout();
    t.device().is_cuda()
        && matches!(t.dtype(), DType::F32 | DType::BF16)
        && plain_or_transposed(l.dims(), l.stride())
}

/// Whether a (m, k) · b (k, n) is an f32 GEMM on TF32 whose reduction dimension is the
/// slow one of both operands: a a transposed view, b plain (k > 1).
#[cfg(feature = "cuda")]
fn tf32_mn_major(a: &Tensor, b: &Tensor) -> bool {
    a.dtype() == DType::F32
        && candle_core::cuda::gemm_reduced_precision_f32()
        && !plain(a.dims(), a.stride())
        && plain(b.dims(), b.stride())
        && b.dims()[0] > 1
}

/// x · wᵀ (+ residual) on rows: x (rows, in), w (out, in), residual (rows, out).
pub fn linear(x: &Tensor, w: &Tensor, residual: Option<&Tensor>) -> Result<Tensor> {
    matmul(x, &w.t()?, residual)
}

/// Weight gradients gᵢᵀ · x of layers sharing the input x (rows, in), each gᵢ (rows, outᵢ):
/// on TF32 the K-major copy of x is made once for all of them.
pub fn weight_grads(gs: &[&Tensor], x: &Tensor) -> Result<Vec<Tensor>> {
    #[cfg(feature = "cuda")]
    if let Some(g) = gs.first() {
        if lt_ok(x) && tf32_mn_major(&g.t()?, x) {
            let xt = crate::kernels::transpose(x)?;
            return gs
                .iter()
                .map(|g| op::gemm(&crate::kernels::transpose(g)?, &xt.t()?, None))
                .collect();
        }
    }
    gs.iter().map(|g| matmul(&g.t()?, x, None)).collect()
}

/// A weight gradient summed into a step's f32 sum: `(sum + gᵀ · x)·scale`, g (rows, out),
/// x (rows, in), sum (out, in) f32 contiguous. On CUDA one GEMM, its epilogue reading and
/// writing the sum in place (β = α = scale; without a sum, β = 0 into a new f32 buffer);
/// elsewhere the product and then `seam::accum`.
pub fn weight_grad_sum(g: &Tensor, x: &Tensor, sum: Option<&Tensor>, scale: f64) -> Result<Tensor> {
    let a = g.t()?;
    #[cfg(feature = "cuda")]
    {
        let sum_ok = sum.is_none_or(|s| {
            s.is_contiguous() && s.dtype() == DType::F32 && s.device().same_device(x.device())
        });
        if lt_ok(&a) && lt_ok(x) && a.dtype() == x.dtype() && sum_ok && !tf32_mn_major(&a, x) {
            let (m, k) = a.dims2()?;
            let (k2, n) = x.dims2()?;
            if k == k2 && sum.is_none_or(|s| s.dims() == [m, n]) {
                return op::gemm_sum(&a, x, sum, scale);
            }
        }
    }
    let dw = matmul(&a, x, None)?;
    let scale = (scale != 1.0).then_some(scale);
    Ok(match sum {
        Some(sum) => {
            seam::accum::accumulate(sum, &dw, scale)?;
            sum.clone()
        }
        None => seam::accum::own_f32(&dw, scale)?,
    })
}

/// a (m, k) · b (k, n) (+ c (m, n)), in a's dtype.
pub fn matmul(a: &Tensor, b: &Tensor, c: Option<&Tensor>) -> Result<Tensor> {
    #[cfg(feature = "cuda")]
    {
        let c_ok = c.is_none_or(|c| {
            c.is_contiguous() && c.dtype() == a.dtype() && c.device().same_device(a.device())
        });
        if lt_ok(a) && lt_ok(b) && a.dtype() == b.dtype() && c_ok {
            let (m, k) = a.dims2()?;
            let (k2, n) = b.dims2()?;
            if k == k2 && c.is_none_or(|c| c.dims() == [m, n]) {
                if tf32_mn_major(a, b) {
                    // TF32 tensor cores read K-major operands only: a weight gradient gᵀ·x
                    // (both row-major, the reduction over rows) gets transposed copies.
                    let a = crate::kernels::transpose(&a.t()?)?;
                    let b = crate::kernels::transpose(b)?;
                    return op::gemm(&a, &b.t()?, c);
                }
                return op::gemm(a, b, c);
            }
        }
    }
    let ab = a.matmul(b)?;
    Ok(match c {
        Some(c) => (ab + c)?,
        None => ab,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device};

    #[test]
    fn matches_matmul_and_add_on_the_cpu() -> Result<()> {
        let dev = Device::Cpu;
        let x = Tensor::randn(0f32, 1., (6, 4), &dev)?;
        let w = Tensor::randn(0f32, 1., (3, 4), &dev)?;
        let r = Tensor::randn(0f32, 1., (6, 3), &dev)?;
        let want = (x.matmul(&w.t()?)? + &r)?;
        let got = linear(&x, &w, Some(&r))?;
        let d = (got - want)?.abs()?.max_all()?.to_scalar::<f32>()?;
        assert!(d < 1e-6, "{d}");
        assert_eq!(matmul(&x, &w.t()?, None)?.dims(), [6, 3]);
        Ok(())
    }

    #[test]
    fn reads_only_plain_and_transposed_matrices() -> Result<()> {
        let x = Tensor::zeros((4, 3), DType::F32, &Device::Cpu)?;
        let ok = |t: &Tensor| plain_or_transposed(t.dims(), t.stride());
        assert!(ok(&x) && ok(&x.t()?));
        assert!(!ok(&x.narrow(1, 0, 2)?), "a column slice is neither");
        assert!(!ok(&x.reshape((2, 2, 3))?), "3-D");
        assert!(ok(&x.narrow(0, 1, 1)?), "one row");
        Ok(())
    }
}

//! The weight comparisons the data-parallel correctness checks share (`bench
//! ddp-check`, `bench zero1-check`; torch.testing.assert_close's rule). Their models and
//! batches by name are `model::named`.

use crate::{DdpError, Result};
use candle_core::{DType, Tensor};

/// Largest |a - b|, or +inf when either side holds a NaN or an infinity anywhere (a
/// diverged run never compares equal, not even to itself).
pub fn max_abs_diff(a: &Tensor, b: &Tensor) -> Result<f32> {
    let (a, b) = (a.to_dtype(DType::F32)?, b.to_dtype(DType::F32)?);
    worst_finite(&(a - b)?.abs()?)
}

/// [`max_abs_diff`] over weights read to the host, one `Vec` a parameter in order (a test's
/// trained weights against a reference's): the largest over all of them, +inf where
/// either side holds a NaN or an infinity; an error where the parameter counts or a
/// parameter's lengths differ.
pub fn max_abs_diff_host(a: &[Vec<f32>], b: &[Vec<f32>]) -> Result<f32> {
    if a.len() != b.len() {
        let e = format!("{} parameters against {}", a.len(), b.len());
        return Err(DdpError::Input(e));
    }
    let mut worst = 0f32;
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        if x.len() != y.len() {
            let e = format!("parameter {i}: {} elements against {}", x.len(), y.len());
            return Err(DdpError::Input(e));
        }
        if !x.is_empty() {
            let t = |v: &[f32]| Tensor::from_slice(v, v.len(), &candle_core::Device::Cpu);
            worst = worst.max(max_abs_diff(&t(x)?, &t(y)?)?);
        }
    }
    Ok(worst)
}

/// The largest element of `d` (|a - b| or a ratio of it), or +inf if any element is not
/// finite: inf - inf and NaN - x are NaN, inf - x is inf, and both make the sum
/// non-finite, so one reduction catches a NaN or inf on either side.
fn worst_finite(d: &Tensor) -> Result<f32> {
    let d = d.flatten_all()?;
    if !d.sum(0)?.to_scalar::<f32>()?.is_finite() {
        return Ok(f32::INFINITY);
    }
    Ok(d.max(0)?.to_scalar::<f32>()?)
}

/// Checks a comparison's tolerances: finite and non-negative, naming the bad one
/// (`tol_name`/`rtol_name`: how the caller's user spells them, e.g. "--tol").
pub fn validate_tolerances(tol: f32, rtol: f32, tol_name: &str, rtol_name: &str) -> Result<()> {
    for (v, name) in [(tol, tol_name), (rtol, rtol_name)] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(DdpError::Input(format!(
                "{name} must be a finite number >= 0, got {v}"
            )));
        }
    }
    Ok(())
}

/// Largest |a - b| / (tol + rtol * |b|): at most 1 when `a` is close to `b`; +inf when
/// either side holds a NaN or an infinity. `tol` and `rtol` must be finite and >= 0
/// (both 0: exact equality).
pub fn worst_ratio(a: &Tensor, b: &Tensor, tol: f32, rtol: f32) -> Result<f32> {
    validate_tolerances(tol, rtol, "tol", "rtol")?;
    let (a, b) = (&a.to_dtype(DType::F32)?, &b.to_dtype(DType::F32)?);
    // A zero allowance (tol 0, |b| 0) divides by the smallest normal float instead: an
    // equal element gives 0, any difference a huge ratio, never 0/0.
    let allowed = ((b.abs()? * rtol as f64)? + tol as f64)?.maximum(f32::MIN_POSITIVE)?;
    worst_finite(&((a - b)?.abs()? / allowed)?)
}

//! RoPE on interleaved pairs (x[2i], x[2i+1]) of x: (…, t, d), rotated by angle pos·θ_i
//! (tables cos, sin: (t, d/2), f32). Its backward is the inverse rotation (sin → −sin), the
//! same kernel. Replaces the composition [`crate::layers::rope`] (narrow, four multiplies,
//! two adds and a stack, all kept for backward).

use super::f32s;
use crate::error::Result;
use candle_core::{CpuStorage, CustomOp3, DType, Layout, Shape, Tensor};

/// Rotation by +angle (`sign` 1) or −angle (`sign` −1).
struct Rope {
    sign: f32,
}

/// (pairs, d/2, t) after checking x (…, t, d) against the tables (t, d/2).
fn dims(xl: &Layout, cl: &Layout, sl: &Layout) -> candle_core::Result<(usize, usize, usize)> {
    let d = xl.shape().dims();
    if d.len() < 2 || !d[d.len() - 1].is_multiple_of(2) {
        candle_core::bail!("rope: x must be (…, t, d) with d even, got {d:?}");
    }
    let (t, half) = (d[d.len() - 2], d[d.len() - 1] / 2);
    for (what, l) in [("cos", cl), ("sin", sl)] {
        if l.shape().dims() != [t, half] {
            candle_core::bail!(
                "rope: {what} table must be ({t}, {half}) for x {d:?}, got {:?}",
                l.shape().dims()
            );
        }
    }
    Ok((xl.shape().elem_count() / 2, half, t))
}

fn cpu_rope(
    x: &[f32],
    c: &[f32],
    s: &[f32],
    (pairs, half, t): (usize, usize, usize),
    sign: f32,
) -> Vec<f32> {
    let mut y = vec![0f32; x.len()];
    for p in 0..pairs {
        let (i, pos) = (p % half, (p / half) % t);
        let (cv, sv) = (c[pos * half + i], sign * s[pos * half + i]);
        let (a, b) = (x[2 * p], x[2 * p + 1]);
        y[2 * p] = a * cv - b * sv;
        y[2 * p + 1] = a * sv + b * cv;
    }
    y
}

impl CustomOp3 for Rope {
    fn name(&self) -> &'static str {
        "rope-interleaved"
    }
    fn cpu_fwd(
        &self,
        xs: &CpuStorage,
        xl: &Layout,
        cs: &CpuStorage,
        cl: &Layout,
        ss: &CpuStorage,
        sl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let dims = dims(xl, cl, sl)?;
        let y = cpu_rope(
            f32s("rope", "x", xs, xl)?,
            f32s("rope", "cos", cs, cl)?,
            f32s("rope", "sin", ss, sl)?,
            dims,
            self.sign,
        );
        Ok((CpuStorage::F32(y), xl.shape().clone()))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        xs: &candle_core::CudaStorage,
        xl: &Layout,
        cs: &candle_core::CudaStorage,
        cl: &Layout,
        ss: &candle_core::CudaStorage,
        sl: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        use candle_core::backend::BackendStorage;
        for (what, l) in [("x", xl), ("cos", cl), ("sin", sl)] {
            super::dense("rope", what, l)?;
        }
        if cs.dtype() != DType::F32 || ss.dtype() != DType::F32 {
            candle_core::bail!("rope: the cos/sin tables must be f32");
        }
        let (pairs, half, t) = dims(xl, cl, sl)?;
        let out = super::gpu::launch(super::gpu::Launch {
            kernel: format!("rope_{}", super::gpu::suffix(xs.dtype())?),
            ins: &[(xs, xl), (cs, cl), (ss, sl)],
            out_dtype: xs.dtype(),
            out_len: xl.shape().elem_count(),
            grid: pairs.div_ceil(super::BLOCK),
            block: super::BLOCK,
            n: [pairs, half, t],
            f: self.sign,
        })?;
        Ok((out, xl.shape().clone()))
    }
    fn bwd(
        &self,
        _x: &Tensor,
        cos: &Tensor,
        sin: &Tensor,
        _y: &Tensor,
        g: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let dx = g
            .contiguous()?
            .apply_op3_no_bwd(cos, sin, &Rope { sign: -self.sign })?;
        Ok((Some(dx), None, None))
    }
}

/// RoPE of x (…, t, d) with f32 tables (t, d/2): fused, or the composition on CPU non-f32.
pub fn rope(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    if x.device().is_cpu() && x.dtype() != DType::F32 {
        return crate::layers::rope(x, cos, sin);
    }
    let (cos, sin) = (
        cos.to_dtype(DType::F32)?.contiguous()?,
        sin.to_dtype(DType::F32)?.contiguous()?,
    );
    Ok(x.contiguous()?.apply_op3(&cos, &sin, Rope { sign: 1.0 })?)
}

/// ∂x of [`rope`] from the output's gradient `g` (the inverse rotation; fused path only).
pub fn rope_bwd(g: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    let (cos, sin) = (cos.contiguous()?, sin.contiguous()?);
    Ok(g.contiguous()?
        .apply_op3_no_bwd(&cos, &sin, &Rope { sign: -1.0 })?)
}

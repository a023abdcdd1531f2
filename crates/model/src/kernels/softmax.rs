//! Causal scaled softmax over the last dim of attention scores (…, tq, tk):
//! y = softmax(scale·x) with keys j > q + (tk − tq) masked to probability 0, and its
//! backward ∂x = scale · y ⊙ (g − Σ g⊙y). Replaces scale, mask add and softmax (five kernels
//! forward and more backward in the composition [`crate::layers::causal_softmax`]).

use super::f32s;
use crate::error::Result;
use candle_core::{CpuStorage, CustomOp1, CustomOp2, DType, Layout, Shape, Tensor};

struct Fwd {
    scale: f32,
}
struct Bwd {
    scale: f32,
}

/// (rows, tk, tq) of scores laid out as (…, tq, tk).
fn dims(l: &Layout) -> candle_core::Result<(usize, usize, usize)> {
    let d = l.shape().dims();
    if d.len() < 2 || d[d.len() - 2] > d[d.len() - 1] {
        candle_core::bail!("causal_softmax: scores must be (…, tq, tk) with tq <= tk, got {d:?}");
    }
    let (tq, tk) = (d[d.len() - 2], d[d.len() - 1]);
    Ok((l.shape().elem_count().checked_div(tk).unwrap_or(0), tk, tq))
}

fn cpu_fwd(x: &[f32], (rows, tk, tq): (usize, usize, usize), scale: f32) -> Vec<f32> {
    let mut y = vec![0f32; x.len()];
    for r in 0..rows {
        let last = r % tq + (tk - tq);
        let (xr, yr) = (&x[r * tk..(r + 1) * tk], &mut y[r * tk..(r + 1) * tk]);
        let m = xr[..=last]
            .iter()
            .fold(f32::NEG_INFINITY, |m, v| m.max(v * scale));
        let s: f32 = xr[..=last].iter().map(|v| (v * scale - m).exp()).sum();
        for j in 0..=last {
            yr[j] = (xr[j] * scale - m).exp() / s;
        }
    }
    y
}

fn cpu_bwd(y: &[f32], g: &[f32], tk: usize, scale: f32) -> Vec<f32> {
    let mut dx = vec![0f32; y.len()];
    for ((yr, gr), dr) in y.chunks(tk).zip(g.chunks(tk)).zip(dx.chunks_mut(tk)) {
        let dot: f32 = yr.iter().zip(gr).map(|(a, b)| a * b).sum();
        for j in 0..tk {
            dr[j] = scale * yr[j] * (gr[j] - dot);
        }
    }
    dx
}

impl CustomOp1 for Fwd {
    fn name(&self) -> &'static str {
        "causal-softmax"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let x = f32s("causal_softmax", "scores", s, l)?;
        let y = cpu_fwd(x, dims(l)?, self.scale);
        Ok((CpuStorage::F32(y), l.shape().clone()))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &candle_core::CudaStorage,
        l: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        use candle_core::backend::BackendStorage;
        super::dense("causal_softmax", "scores", l)?;
        let (rows, tk, tq) = dims(l)?;
        let out = super::gpu::launch(super::gpu::Launch {
            kernel: format!(
                "causal_softmax_fwd_{}{}",
                vec4(tk, &[l]),
                super::gpu::suffix(s.dtype())?
            ),
            ins: &[(s, l)],
            out_dtype: s.dtype(),
            out_len: l.shape().elem_count(),
            grid: rows.div_ceil(4),
            block: 128,
            n: [rows, tk, tq],
            f: self.scale,
        })?;
        Ok((out, l.shape().clone()))
    }
    fn bwd(&self, _x: &Tensor, y: &Tensor, g: &Tensor) -> candle_core::Result<Option<Tensor>> {
        let dx = y.apply_op2_no_bwd(&g.contiguous()?, &Bwd { scale: self.scale })?;
        Ok(Some(dx))
    }
}

impl CustomOp2 for Bwd {
    fn name(&self) -> &'static str {
        "causal-softmax-bwd"
    }
    fn cpu_fwd(
        &self,
        ys: &CpuStorage,
        yl: &Layout,
        gs: &CpuStorage,
        gl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (y, g) = (
            f32s("causal_softmax bwd", "y", ys, yl)?,
            f32s("causal_softmax bwd", "grad", gs, gl)?,
        );
        let (_, tk, _) = dims(yl)?;
        Ok((
            CpuStorage::F32(cpu_bwd(y, g, tk.max(1), self.scale)),
            yl.shape().clone(),
        ))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        ys: &candle_core::CudaStorage,
        yl: &Layout,
        gs: &candle_core::CudaStorage,
        gl: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        use candle_core::backend::BackendStorage;
        super::dense("causal_softmax bwd", "y", yl)?;
        super::dense("causal_softmax bwd", "grad", gl)?;
        let (rows, tk, tq) = dims(yl)?;
        let out = super::gpu::launch(super::gpu::Launch {
            kernel: format!(
                "causal_softmax_bwd_{}{}",
                vec4(tk, &[yl, gl]),
                super::gpu::suffix(ys.dtype())?
            ),
            ins: &[(ys, yl), (gs, gl)],
            out_dtype: ys.dtype(),
            out_len: yl.shape().elem_count(),
            grid: rows.div_ceil(4),
            block: 128,
            n: [rows, tk, tq],
            f: self.scale,
        })?;
        Ok((out, yl.shape().clone()))
    }
}

/// "v_" (the kernels holding 4 consecutive entries per lane) where rows of `tk` split
/// into aligned groups of 4 and fit the registers (tk <= 512), else "".
#[cfg(feature = "cuda")]
fn vec4(tk: usize, ls: &[&Layout]) -> &'static str {
    let aligned = ls.iter().all(|l| l.start_offset().is_multiple_of(4));
    if tk.is_multiple_of(4) && tk <= 512 && aligned {
        "v_"
    } else {
        ""
    }
}

/// softmax(scale·x) over the last dim of scores (…, tq, tk), each query seeing the keys up
/// to its own position (offset by tk − tq): fused, or the composition on CPU non-f32.
pub fn causal_softmax(x: &Tensor, scale: f64) -> Result<Tensor> {
    if x.device().is_cpu() && x.dtype() != DType::F32 {
        return crate::layers::causal_softmax(x, scale);
    }
    Ok(x.contiguous()?.apply_op1(Fwd {
        scale: scale as f32,
    })?)
}

/// ∂x of [`causal_softmax`] from its output `y` and the output's gradient `g` (for
/// hand-written backward passes; the fused path only).
pub fn causal_softmax_bwd(y: &Tensor, g: &Tensor, scale: f64) -> Result<Tensor> {
    Ok(y.contiguous()?.apply_op2_no_bwd(
        &g.contiguous()?,
        &Bwd {
            scale: scale as f32,
        },
    )?)
}

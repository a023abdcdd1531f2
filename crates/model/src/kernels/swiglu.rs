//! The SwiGLU activation silu(a) ⊙ b in one kernel, and its backward in one kernel writing
//! ∂a and ∂b (σ = sigmoid(a)): ∂a = g·b·σ·(1 + a(1 − σ)), ∂b = g·a·σ. Replaces silu and the
//! multiply of [`crate::layers::silu_mul`] (whose backward keeps silu(a) and σ alive).

use super::f32s;
use crate::error::Result;
use candle_core::{CpuStorage, CustomOp2, CustomOp3, DType, Layout, Shape, Tensor};

struct Fwd;
/// Output (2, n…): ∂a then ∂b.
struct Bwd;

fn same(op: &str, a: &Layout, b: &Layout) -> candle_core::Result<()> {
    if a.shape() != b.shape() {
        candle_core::bail!("{op}: shapes differ, {:?} vs {:?}", a.shape(), b.shape());
    }
    Ok(())
}

fn sigmoid(v: f32) -> f32 {
    1.0 / (1.0 + (-v).exp())
}

impl CustomOp2 for Fwd {
    fn name(&self) -> &'static str {
        "silu-mul"
    }
    fn cpu_fwd(
        &self,
        a_s: &CpuStorage,
        al: &Layout,
        b_s: &CpuStorage,
        bl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        same("silu_mul", al, bl)?;
        let (a, b) = (
            f32s("silu_mul", "a", a_s, al)?,
            f32s("silu_mul", "b", b_s, bl)?,
        );
        let y = a.iter().zip(b).map(|(&a, &b)| a * sigmoid(a) * b).collect();
        Ok((CpuStorage::F32(y), al.shape().clone()))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        a_s: &candle_core::CudaStorage,
        al: &Layout,
        b_s: &candle_core::CudaStorage,
        bl: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        use candle_core::backend::BackendStorage;
        same("silu_mul", al, bl)?;
        super::dense("silu_mul", "a", al)?;
        super::dense("silu_mul", "b", bl)?;
        let n = al.shape().elem_count();
        let out = super::gpu::launch(super::gpu::Launch {
            kernel: format!("silu_mul_fwd_{}", super::gpu::suffix(a_s.dtype())?),
            ins: &[(a_s, al), (b_s, bl)],
            out_dtype: a_s.dtype(),
            out_len: n,
            grid: vec_grid(n, a_s.dtype()),
            block: super::BLOCK,
            n: [n, 0, 0],
            f: 0.0,
        })?;
        Ok((out, al.shape().clone()))
    }
    fn bwd(
        &self,
        a: &Tensor,
        b: &Tensor,
        _y: &Tensor,
        g: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let both = a.apply_op3_no_bwd(b, &g.contiguous()?, &Bwd)?;
        Ok((Some(both.get(0)?), Some(both.get(1)?)))
    }
}

impl CustomOp3 for Bwd {
    fn name(&self) -> &'static str {
        "silu-mul-bwd"
    }
    fn cpu_fwd(
        &self,
        a_s: &CpuStorage,
        al: &Layout,
        b_s: &CpuStorage,
        bl: &Layout,
        g_s: &CpuStorage,
        gl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        same("silu_mul bwd", al, gl)?;
        let op = "silu_mul bwd";
        let (a, b, g) = (
            f32s(op, "a", a_s, al)?,
            f32s(op, "b", b_s, bl)?,
            f32s(op, "grad", g_s, gl)?,
        );
        let n = a.len();
        let mut out = vec![0f32; 2 * n];
        for i in 0..n {
            let s = sigmoid(a[i]);
            out[i] = g[i] * b[i] * s * (1.0 + a[i] * (1.0 - s));
            out[n + i] = g[i] * a[i] * s;
        }
        Ok((CpuStorage::F32(out), stacked(al)))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        a_s: &candle_core::CudaStorage,
        al: &Layout,
        b_s: &candle_core::CudaStorage,
        bl: &Layout,
        g_s: &candle_core::CudaStorage,
        gl: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        use candle_core::backend::BackendStorage;
        same("silu_mul bwd", al, gl)?;
        for (what, l) in [("a", al), ("b", bl), ("grad", gl)] {
            super::dense("silu_mul bwd", what, l)?;
        }
        let n = al.shape().elem_count();
        let out = super::gpu::launch(super::gpu::Launch {
            kernel: format!("silu_mul_bwd_{}", super::gpu::suffix(a_s.dtype())?),
            ins: &[(a_s, al), (b_s, bl), (g_s, gl)],
            out_dtype: a_s.dtype(),
            out_len: 2 * n,
            grid: vec_grid(n, a_s.dtype()),
            block: super::BLOCK,
            n: [n, 0, 0],
            f: 0.0,
        })?;
        Ok((out, stacked(al)))
    }
}

/// The shape (2, a's dims…).
fn stacked(al: &Layout) -> Shape {
    let mut d = vec![2];
    d.extend_from_slice(al.shape().dims());
    Shape::from(d)
}

/// silu(a) ⊙ b: fused, or the composition on CPU non-f32.
pub fn silu_mul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    if a.device().is_cpu() && a.dtype() != DType::F32 {
        return crate::layers::silu_mul(a, b);
    }
    Ok(a.contiguous()?.apply_op2(&b.contiguous()?, Fwd)?)
}

/// (∂a, ∂b) of [`silu_mul`] from its inputs and the output's gradient `g` (fused path only).
pub fn silu_mul_bwd(a: &Tensor, b: &Tensor, g: &Tensor) -> Result<(Tensor, Tensor)> {
    let both = a
        .contiguous()?
        .apply_op3_no_bwd(&b.contiguous()?, &g.contiguous()?, &Bwd)?;
    Ok((both.get(0)?, both.get(1)?))
}

/// Blocks for the 16-byte element-wise kernels: one chunk per thread, at most 16 blocks per
/// SM of an H100/H200 (the kernels stride over the rest).
#[cfg(feature = "cuda")]
fn vec_grid(n: usize, dtype: candle_core::DType) -> usize {
    let per = 16 / dtype.size_in_bytes();
    n.div_ceil(per * super::BLOCK).clamp(1, 132 * 16)
}

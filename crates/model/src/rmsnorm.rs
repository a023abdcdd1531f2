//! Fused RMSNorm with a backward pass, as a candle `CustomOp2` on (x, w): one kernel for
//! the forward and one for ∂x (kernels/rmsnorm.cu), ∂w = Σ_rows g ⊙ x ⊙ r with candle ops.
//! f32 on CPU and CUDA; other dtypes fall back to the differentiable composition
//! [`crate::layers::rms_norm`]. Derivation of the gradients: docs/kernels.md.

use crate::error::Result;
use candle_core::{CpuStorage, CustomOp2, CustomOp3, DType, Layout, Shape, Tensor, D};

struct RmsNorm {
    eps: f32,
}

struct RmsNormDx {
    eps: f32,
}

fn slice<'a>(s: &'a CpuStorage, l: &Layout) -> candle_core::Result<&'a [f32]> {
    match s {
        CpuStorage::F32(v) => Ok(&v[l.start_offset()..l.start_offset() + l.shape().elem_count()]),
        _ => candle_core::bail!("fused rms_norm: f32 only"),
    }
}

fn contiguous(what: &str, l: &Layout) -> candle_core::Result<()> {
    if !l.is_contiguous() {
        candle_core::bail!("fused rms_norm: {what} must be contiguous");
    }
    Ok(())
}

/// r = 1/√(mean(x²) + eps) of one row.
fn row_rstd(xr: &[f32], eps: f32) -> f32 {
    1.0 / (xr.iter().map(|v| v * v).sum::<f32>() / xr.len() as f32 + eps).sqrt()
}

/// Host reference of the forward, row by row.
fn cpu_forward(x: &[f32], w: &[f32], eps: f32) -> Vec<f32> {
    let d = w.len();
    let mut y = vec![0f32; x.len()];
    for (xr, yr) in x.chunks(d).zip(y.chunks_mut(d)) {
        let r = row_rstd(xr, eps);
        for ((yi, xi), wi) in yr.iter_mut().zip(xr).zip(w) {
            *yi = xi * r * wi;
        }
    }
    y
}

/// Host ∂x: r·(g⊙w) − x·r³·mean(g⊙w⊙x), row by row.
fn cpu_dx(x: &[f32], w: &[f32], g: &[f32], eps: f32) -> Vec<f32> {
    let d = w.len();
    let mut dx = vec![0f32; x.len()];
    for ((xr, gr), dr) in x.chunks(d).zip(g.chunks(d)).zip(dx.chunks_mut(d)) {
        let r = row_rstd(xr, eps);
        let m = xr
            .iter()
            .zip(gr)
            .zip(w)
            .map(|((xi, gi), wi)| gi * wi * xi)
            .sum::<f32>()
            / d as f32;
        for i in 0..d {
            dr[i] = r * gr[i] * w[i] - xr[i] * r * r * r * m;
        }
    }
    dx
}

#[cfg(feature = "cuda")]
mod gpu {
    use candle_core::cuda_backend::cudarc::driver::{LaunchConfig, PushKernelArg};
    use candle_core::cuda_backend::{CudaStorage, WrapErr};
    use candle_core::{Layout, Shape};

    const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/rmsnorm.ptx"));

    fn cfg(rows: usize, cols: usize) -> LaunchConfig {
        let threads = cols.div_ceil(32).clamp(1, 32) as u32 * 32;
        LaunchConfig {
            grid_dim: (rows as u32, 1, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    /// Runs `kernel` over rows of `ins[0]` (each input as (storage, layout)), returning a new
    /// f32 buffer shaped like `ins[0]`.
    pub fn launch(
        kernel: &str,
        ins: &[(&CudaStorage, &Layout)],
        eps: f32,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let (x, xl) = ins[0];
        let dev = x.device.clone();
        let shape = xl.shape().clone();
        let cols = *shape.dims().last().expect("rank >= 1");
        let rows = shape.elem_count() / cols;
        let func = dev.get_or_load_custom_func(kernel, "model_rmsnorm", PTX)?;
        let stream = dev.cuda_stream();
        // SAFETY: every element is written by the kernel.
        let out = unsafe { stream.alloc::<f32>(shape.elem_count()) }.w()?;
        let views: Vec<_> = ins
            .iter()
            .map(|(s, l)| {
                let sl = s.as_cuda_slice::<f32>()?;
                Ok(sl.slice(l.start_offset()..l.start_offset() + l.shape().elem_count()))
            })
            .collect::<candle_core::Result<_>>()?;
        let mut out = out;
        let cols_i = cols as i32;
        let mut b = func.builder();
        for v in &views {
            b.arg(v);
        }
        b.arg(&mut out).arg(&cols_i).arg(&eps);
        // SAFETY: argument list matches the kernel signature; buffers hold rows × cols f32.
        unsafe { b.launch(cfg(rows, cols)) }.w()?;
        Ok((CudaStorage::wrap_cuda_slice(out, dev), shape))
    }
}

impl CustomOp2 for RmsNorm {
    fn name(&self) -> &'static str {
        "fused-rms-norm"
    }
    fn cpu_fwd(
        &self,
        xs: &CpuStorage,
        xl: &Layout,
        ws: &CpuStorage,
        wl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        contiguous("x", xl)?;
        let y = cpu_forward(slice(xs, xl)?, slice(ws, wl)?, self.eps);
        Ok((CpuStorage::F32(y), xl.shape().clone()))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        xs: &candle_core::CudaStorage,
        xl: &Layout,
        ws: &candle_core::CudaStorage,
        wl: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        contiguous("x", xl)?;
        gpu::launch("rmsnorm_fwd_f32", &[(xs, xl), (ws, wl)], self.eps)
    }
    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _y: &Tensor,
        g: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let g = g.contiguous()?;
        let dx = x.apply_op3_no_bwd(w, &g, &RmsNormDx { eps: self.eps })?;
        let r = (x.sqr()?.mean_keepdim(D::Minus1)? + self.eps as f64)?
            .sqrt()?
            .recip()?;
        let d = w.dim(0)?;
        // Σ over rows as a (1 × rows) · (rows × d) product: one GEMV instead of a strided
        // reduction over dim 0.
        let prod = (g * x)?.broadcast_mul(&r)?.reshape(((), d))?;
        let ones = Tensor::ones((1, prod.dim(0)?), prod.dtype(), prod.device())?;
        let dw = ones.matmul(&prod)?.reshape(d)?;
        Ok((Some(dx), Some(dw)))
    }
}

impl CustomOp3 for RmsNormDx {
    fn name(&self) -> &'static str {
        "fused-rms-norm-dx"
    }
    fn cpu_fwd(
        &self,
        xs: &CpuStorage,
        xl: &Layout,
        ws: &CpuStorage,
        wl: &Layout,
        gs: &CpuStorage,
        gl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        contiguous("x", xl)?;
        contiguous("grad", gl)?;
        let dx = cpu_dx(slice(xs, xl)?, slice(ws, wl)?, slice(gs, gl)?, self.eps);
        Ok((CpuStorage::F32(dx), xl.shape().clone()))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        xs: &candle_core::CudaStorage,
        xl: &Layout,
        ws: &candle_core::CudaStorage,
        wl: &Layout,
        gs: &candle_core::CudaStorage,
        gl: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        contiguous("x", xl)?;
        contiguous("grad", gl)?;
        gpu::launch(
            "rmsnorm_bwd_dx_f32",
            &[(xs, xl), (ws, wl), (gs, gl)],
            self.eps,
        )
    }
}

/// RMSNorm over the last dimension: fused for f32, the composition otherwise.
pub fn rms_norm_fused(x: &Tensor, w: &Tensor, eps: f64) -> Result<Tensor> {
    if x.dtype() != DType::F32 || w.dtype() != DType::F32 {
        return crate::layers::rms_norm(x, w, eps);
    }
    Ok(x.contiguous()?
        .apply_op2(&w.contiguous()?, RmsNorm { eps: eps as f32 })?)
}

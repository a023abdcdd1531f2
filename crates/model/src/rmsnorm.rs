//! Fused RMSNorm with a backward pass, as a candle `CustomOp2` on (x, w): one kernel for
//! the forward and one for ∂x (kernels/fused.cu); ∂w = Σ_rows g ⊙ x ⊙ r in f32 as one
//! kernel of partial sums over blocks of rows plus one sum. f32 on CPU, f32 and bf16 on CUDA; other cases fall back to the differentiable composition
//! [`crate::layers::rms_norm`]. Derivation of the gradients: docs/kernels.md.

use crate::error::Result;
use crate::kernels::f32s;
use candle_core::{CpuStorage, CustomOp2, CustomOp3, DType, Layout, Shape, Tensor};

struct RmsNorm {
    eps: f32,
}

struct RmsNormDx {
    eps: f32,
}

/// (x, g) → ∂w partial sums (⌈rows / DW_ROWS⌉, d), f32.
struct RmsNormDwPart {
    eps: f32,
}

/// Rows per ∂w partial sum (≤ 32, the kernel's shared array).
const DW_ROWS: usize = 8;

const OP: &str = "fused rms_norm";

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

/// Host ∂w partial sums: part[b, j] = Σ over rows of block b of g·x·r (r of the row).
fn cpu_dw_part(x: &[f32], g: &[f32], d: usize, eps: f32) -> Vec<f32> {
    let mut part = Vec::with_capacity(x.len().div_ceil(d * DW_ROWS) * d);
    for (xb, gb) in x.chunks(d * DW_ROWS).zip(g.chunks(d * DW_ROWS)) {
        let mut acc = vec![0f32; d];
        for (xr, gr) in xb.chunks(d).zip(gb.chunks(d)) {
            let r = row_rstd(xr, eps);
            for ((a, xi), gi) in acc.iter_mut().zip(xr).zip(gr) {
                *a += gi * xi * r;
            }
        }
        part.extend(acc);
    }
    part
}

/// Launches the fused.cu RMSNorm kernel `kernel` for x's dtype: one block per row, or, for
/// the `*_v` kernels (`warp_rows`), one warp per row and 4 rows per block.
#[cfg(feature = "cuda")]
fn launch(
    kernel: &str,
    ins: &[(&candle_core::CudaStorage, &Layout)],
    eps: f32,
    warp_rows: bool,
) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
    use crate::kernels::gpu;
    use candle_core::backend::BackendStorage;
    let (x, xl) = ins[0];
    let shape = xl.shape().clone();
    let cols = *shape.dims().last().expect("rank >= 1");
    let rows = shape.elem_count() / cols.max(1);
    let (grid, block) = if warp_rows {
        (rows.div_ceil(4), 128)
    } else {
        (rows, cols.div_ceil(32).clamp(1, 8) * 32)
    };
    let out = gpu::launch(gpu::Launch {
        kernel: format!("{kernel}_{}", gpu::suffix(x.dtype())?),
        ins,
        out_dtype: x.dtype(),
        out_len: shape.elem_count(),
        grid,
        block,
        n: [rows, cols, 0],
        f: eps,
    })?;
    Ok((out, shape))
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
        let y = cpu_forward(f32s(OP, "x", xs, xl)?, f32s(OP, "w", ws, wl)?, self.eps);
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
        crate::kernels::dense(OP, "x", xl)?;
        let ins = [(xs, xl), (ws, wl)];
        let cols = *xl.dims().last().expect("rank >= 1");
        if crate::kernels::gpu::rows16(&ins, cols) {
            launch("rmsnorm_fwd_v", &ins, self.eps, true)
        } else {
            launch("rmsnorm_fwd", &ins, self.eps, false)
        }
    }
    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _y: &Tensor,
        g: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let (dx, dw) =
            backward(x, w, g, self.eps).map_err(|e| candle_core::Error::Msg(e.to_string()))?;
        Ok((Some(dx), Some(dw.to_dtype(w.dtype())?)))
    }
}

impl CustomOp2 for RmsNormDwPart {
    fn name(&self) -> &'static str {
        "fused-rms-norm-dw"
    }
    fn cpu_fwd(
        &self,
        xs: &CpuStorage,
        xl: &Layout,
        gs: &CpuStorage,
        gl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let d = *xl.dims().last().expect("rank >= 1");
        let (x, g) = (f32s(OP, "x", xs, xl)?, f32s(OP, "grad", gs, gl)?);
        let part = cpu_dw_part(x, g, d, self.eps);
        let blocks = part.len() / d.max(1);
        Ok((CpuStorage::F32(part), Shape::from((blocks, d))))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        xs: &candle_core::CudaStorage,
        xl: &Layout,
        gs: &candle_core::CudaStorage,
        gl: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        use crate::kernels::gpu;
        use candle_core::backend::BackendStorage;
        crate::kernels::dense(OP, "x", xl)?;
        crate::kernels::dense(OP, "grad", gl)?;
        let cols = *xl.dims().last().expect("rank >= 1");
        let rows = xl.shape().elem_count() / cols.max(1);
        let blocks = rows.div_ceil(DW_ROWS);
        let out = gpu::launch(gpu::Launch {
            kernel: format!("rmsnorm_dw_part_{}", gpu::suffix(xs.dtype())?),
            ins: &[(xs, xl), (gs, gl)],
            out_dtype: DType::F32,
            out_len: blocks * cols,
            grid: blocks,
            block: cols.div_ceil(32).clamp(1, 8) * 32,
            n: [rows, cols, DW_ROWS],
            f: self.eps,
        })?;
        Ok((out, Shape::from((blocks, cols))))
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
        let (x, w) = (f32s(OP, "x", xs, xl)?, f32s(OP, "w", ws, wl)?);
        let dx = cpu_dx(x, w, f32s(OP, "grad", gs, gl)?, self.eps);
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
        crate::kernels::dense(OP, "x", xl)?;
        crate::kernels::dense(OP, "grad", gl)?;
        launch(
            "rmsnorm_dx",
            &[(xs, xl), (ws, wl), (gs, gl)],
            self.eps,
            false,
        )
    }
}

/// RMSNorm over the last dimension: fused (f32 on CPU; f32 and bf16 on CUDA, where x and w
/// share the dtype), the composition otherwise.
pub fn rms_norm_fused(x: &Tensor, w: &Tensor, eps: f64) -> Result<Tensor> {
    let fused = match x.device() {
        candle_core::Device::Cuda(_) => matches!(x.dtype(), DType::F32 | DType::BF16),
        _ => x.dtype() == DType::F32,
    };
    if !fused || w.dtype() != x.dtype() {
        return crate::layers::rms_norm(x, w, eps);
    }
    Ok(x.contiguous()?
        .apply_op2(&w.contiguous()?, RmsNorm { eps: eps as f32 })?)
}

/// [`backward`] with the residual branch's gradient `res` added to ∂x: one pass on CUDA.
pub fn backward_add(
    x: &Tensor,
    w: &Tensor,
    g: &Tensor,
    eps: f32,
    res: &Tensor,
) -> Result<(Tensor, Tensor)> {
    #[cfg(feature = "cuda")]
    if let Some(both) = crate::kernels::norm_bwd::backward(x, w, g, eps, Some(res))? {
        return Ok(both);
    }
    let (dx, dw) = backward(x, w, g, eps)?;
    Ok((crate::kernels::add(res, &dx)?, dw))
}

/// (∂x, ∂w) of the fused RMSNorm from its input, weight and the output's gradient; ∂w in
/// f32 whatever the compute dtype (for hand-written backward passes; fused path only).
pub fn backward(x: &Tensor, w: &Tensor, g: &Tensor, eps: f32) -> Result<(Tensor, Tensor)> {
    #[cfg(feature = "cuda")]
    if let Some(both) = crate::kernels::norm_bwd::backward(x, w, g, eps, None)? {
        return Ok(both);
    }
    let g = g.contiguous()?;
    let dx = x
        .contiguous()?
        .apply_op3_no_bwd(&w.contiguous()?, &g, &RmsNormDx { eps })?;
    // ∂w = Σ_rows g ⊙ x ⊙ r in f32: partial sums over blocks of rows, then their sum.
    if g.dtype() != x.dtype() {
        return Err(crate::error::ModelError::Input(format!(
            "{OP} backward: gradient {:?} and input {:?} differ in dtype",
            g.dtype(),
            x.dtype()
        )));
    }
    let dw = x
        .contiguous()?
        .apply_op2_no_bwd(&g, &RmsNormDwPart { eps })?
        .sum(0)?;
    Ok((dx, dw))
}

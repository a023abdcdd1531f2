//! Memory-bound helpers of the block's hand-written passes, each one kernel on CUDA where
//! candle's generic kernels ran at 4-16 % of the copy rate (the per-kernel table of run
//! 17): the residual adds and the attention's head transposes (16 bytes at a time), and
//! the 2-D transpose that gives TF32 weight-gradient GEMMs K-major operands ([`transpose`]).
//! Elsewhere (CPU, other dtypes, unaligned views) they are candle's ops. No backward.

use crate::error::Result;
use candle_core::{CpuStorage, CustomOp1, CustomOp2, Layout, Shape, Tensor};

/// Whether `t` can take the 16-byte kernels: f32 or bf16 on CUDA, contiguous, starting on
/// a 16-byte boundary.
fn fast(t: &Tensor) -> bool {
    use candle_core::DType;
    let l = t.layout();
    t.device().is_cuda()
        && matches!(t.dtype(), DType::F32 | DType::BF16)
        && l.is_contiguous()
        && (l.start_offset() * t.dtype().size_in_bytes()).is_multiple_of(16)
}

struct Add;

impl CustomOp2 for Add {
    fn name(&self) -> &'static str {
        "add"
    }
    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        super::cuda_only("add")
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        a: &candle_core::CudaStorage,
        al: &Layout,
        b: &candle_core::CudaStorage,
        bl: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        use super::gpu;
        use candle_core::backend::BackendStorage;
        let n = al.shape().elem_count();
        let per = 16 / a.dtype().size_in_bytes();
        let out = gpu::launch(gpu::Launch {
            kernel: format!("add_{}", gpu::suffix(a.dtype())?),
            ins: &[(a, al), (b, bl)],
            out_dtype: a.dtype(),
            out_len: n,
            grid: n.div_ceil(per * super::BLOCK).clamp(1, 132 * 8),
            block: super::BLOCK,
            n: [n, 0, 0],
            f: 0.0,
        })?;
        Ok((out, al.shape().clone()))
    }
}

/// a + b (same shape and dtype).
pub fn add(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    if fast(a) && fast(b) && a.dims() == b.dims() && a.dtype() == b.dtype() {
        return Ok(a.apply_op2_no_bwd(b, &Add)?);
    }
    Ok((a + b)?)
}

/// The two data-movement ops, one kernel each: (A, B, C, E) → (A, C, B, E) in 16-byte
/// chunks, and the 2-D transpose through shared tiles.
#[derive(Clone, Copy)]
enum Move {
    Swap12,
    Transpose,
}

impl CustomOp1 for Move {
    fn name(&self) -> &'static str {
        match self {
            Move::Swap12 => "swap12",
            Move::Transpose => "transpose2d",
        }
    }
    fn cpu_fwd(&self, _: &CpuStorage, _: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        super::cuda_only(self.name())
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        x: &candle_core::CudaStorage,
        l: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        use super::gpu;
        use candle_core::backend::BackendStorage;
        // (grid, block, n, f, output shape)
        let (grid, block, n, f, shape) = match self {
            Move::Swap12 => {
                let (a, b, c, e) = l.shape().dims4()?;
                let ev = e * x.dtype().size_in_bytes() / 16;
                let grid = (a * b * c * ev).div_ceil(super::BLOCK).clamp(1, 132 * 8);
                (
                    grid,
                    super::BLOCK,
                    [a, b, c],
                    ev as f32,
                    Shape::from((a, c, b, e)),
                )
            }
            Move::Transpose => {
                let (r, c) = l.shape().dims2()?;
                let grid = (r.div_ceil(32) * c.div_ceil(32)).clamp(1, 132 * 16);
                (grid, 256, [r, c, 0], 0.0, Shape::from((c, r)))
            }
        };
        let out = gpu::launch(gpu::Launch {
            kernel: format!("{}_{}", self.name(), gpu::suffix(x.dtype())?),
            ins: &[(x, l)],
            out_dtype: x.dtype(),
            out_len: l.shape().elem_count(),
            grid,
            block,
            n,
            f,
        })?;
        Ok((out, shape))
    }
}

/// x (A, B, C, E) → contiguous (A, C, B, E): `x.transpose(1, 2)?.contiguous()`.
pub fn swap12(x: &Tensor) -> Result<Tensor> {
    let (_, _, _, e) = x.dims4()?;
    if fast(x) && (e * x.dtype().size_in_bytes()).is_multiple_of(16) {
        return Ok(x.apply_op1_no_bwd(&Move::Swap12)?);
    }
    Ok(x.transpose(1, 2)?.contiguous()?)
}

/// x (r, c) → contiguous (c, r): `x.t()?.contiguous()`.
pub fn transpose(x: &Tensor) -> Result<Tensor> {
    if fast(x) && x.rank() == 2 {
        return Ok(x.apply_op1_no_bwd(&Move::Transpose)?);
    }
    Ok(x.t()?.contiguous()?)
}

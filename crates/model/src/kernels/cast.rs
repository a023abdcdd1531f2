//! f32 → bf16 casts of whole (detached) tensors in one kernel that converts four elements
//! per thread (16-byte loads, 8-byte stores): the bf16 forward casts every block's f32
//! master weights each step, and candle's element-at-a-time cast ran at about half the
//! memory bandwidth. Rounds to nearest even, as candle's cast does, so the result is
//! bit-identical (`bench model-check` compares them). No backward.

use super::f32s;
use crate::error::Result;
use candle_core::{CpuStorage, CustomOp1, DType, Layout, Shape, Tensor};

struct ToBf16;

impl CustomOp1 for ToBf16 {
    fn name(&self) -> &'static str {
        "to-bf16"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let x = f32s("to_bf16", "x", s, l)?;
        let y = x.iter().map(|&v| half::bf16::from_f32(v)).collect();
        Ok((CpuStorage::BF16(y), l.shape().clone()))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &candle_core::CudaStorage,
        l: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        super::dense("to_bf16", "x", l)?;
        let n = l.shape().elem_count();
        let out = super::gpu::launch(super::gpu::Launch {
            kernel: "cast_f32_bf16_x4".into(),
            ins: &[(s, l)],
            out_dtype: DType::BF16,
            out_len: n,
            grid: (n / 4).div_ceil(256).clamp(1, 132 * 8),
            block: 256,
            n: [n, 0, 0],
            f: 0.0,
        })?;
        Ok((out, l.shape().clone()))
    }
}

/// `t` in bf16: the four-at-a-time kernel for a contiguous f32 CUDA tensor starting at a
/// multiple of 4 elements (16-byte aligned), candle's cast otherwise. Detached.
pub fn to_bf16(t: &Tensor) -> Result<Tensor> {
    let l = t.layout();
    let fast = t.device().is_cuda()
        && t.dtype() == DType::F32
        && l.is_contiguous()
        && l.start_offset().is_multiple_of(4);
    Ok(if fast {
        t.detach().apply_op1_no_bwd(&ToBf16)?
    } else {
        t.detach().to_dtype(DType::BF16)?
    })
}

//! The RMSNorm backward on CUDA in two kernels with many blocks each (fused.cu
//! `rmsnorm_dx_rs`, `rmsnorm_dw_rs`): ∂x with each row's inverse RMS (one block per row),
//! then ∂w's partial sums over chunks of rows from x, g and those RMS values (one block per
//! chunk of rows and 256 columns), summed by candle. ∂x can take the residual branch's
//! gradient in the same pass (the block's `dx2 = g + ∂norm2` and `dx = dx2 + ∂norm1`).
//! History (nvidia-h200, xl bf16, 97 calls per step): a ∂x kernel plus a ∂w-partials kernel
//! took 4.6 ms (run 17); one kernel walking 4 rows per block, 2.1 ms (run 18) and, holding
//! the 4 rows in registers, 3.5 ms (run 19): a block that reduces rows one after another
//! is latency-bound at 1,024 rows.

use super::gpu;
use crate::error::Result;
use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::CudaSlice;
use candle_core::{CpuStorage, CustomOp1, CustomOp3, DType, Layout, Shape, Tensor};

/// Threads per block, and the most columns a thread keeps (norm_bwd.cuh's RB_MAXC: so at most
/// 4096 columns).
const THREADS: usize = 256;
const MAX_PER_THREAD: usize = 16;
/// Rows per ∂w partial sum.
const DW_ROWS: usize = 16;

/// ∂x (+ residual) and the rows' inverse RMS (written to `rs`).
struct Dx<'a> {
    eps: f32,
    rs: &'a CudaSlice<f32>,
    res: Option<&'a Tensor>,
}

impl CustomOp3 for Dx<'_> {
    fn name(&self) -> &'static str {
        "rms-norm-dx"
    }
    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        super::cuda_only("rms-norm dx")
    }
    fn cuda_fwd(
        &self,
        xs: &candle_core::CudaStorage,
        xl: &Layout,
        ws: &candle_core::CudaStorage,
        wl: &Layout,
        gs: &candle_core::CudaStorage,
        gl: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        super::dense("rms-norm backward", "x", xl)?;
        super::dense("rms-norm backward", "grad", gl)?;
        let cols = *xl.dims().last().unwrap_or(&1);
        let rows = xl.shape().elem_count() / cols.max(1);
        if self.rs.len() != rows {
            candle_core::bail!(
                "rms-norm backward: {} RMS slots for {rows} rows",
                self.rs.len()
            );
        }
        let guard = self.res.map(|r| r.storage_and_layout());
        let res = match &guard {
            Some((st, l)) => match &**st {
                candle_core::Storage::Cuda(c) => Some((c, *l)),
                _ => candle_core::bail!("rms-norm backward: the residual is not on CUDA"),
            },
            None => None,
        };
        let mut ins = vec![(xs, xl), (ws, wl), (gs, gl)];
        if let Some((c, l)) = res {
            super::dense("rms-norm backward", "residual", l)?;
            ins.push((c, l));
        }
        let suffix = if res.is_some() { "_add" } else { "" };
        let out = gpu::launch_extra(
            gpu::Launch {
                kernel: format!("rmsnorm_dx_rs{suffix}_{}", gpu::suffix(xs.dtype())?),
                ins: &ins,
                out_dtype: xs.dtype(),
                out_len: rows * cols,
                grid: rows,
                block: THREADS,
                n: [rows, cols, 0],
                f: self.eps,
            },
            Some(self.rs),
        )?;
        Ok((out, xl.shape().clone()))
    }
}

/// ∂w partial sums (⌈rows / DW_ROWS⌉, cols) from (x, g) and the rows' inverse RMS.
struct DwPart<'a> {
    g: &'a Tensor,
    rs: &'a Tensor,
}

impl CustomOp1 for DwPart<'_> {
    fn name(&self) -> &'static str {
        "rms-norm-dw"
    }
    fn cpu_fwd(&self, _: &CpuStorage, _: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        super::cuda_only("rms-norm dw")
    }
    fn cuda_fwd(
        &self,
        xs: &candle_core::CudaStorage,
        xl: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        let cols = *xl.dims().last().unwrap_or(&1);
        let rows = xl.shape().elem_count() / cols.max(1);
        let (gst, gl) = self.g.storage_and_layout();
        let (rst, rl) = self.rs.storage_and_layout();
        let (candle_core::Storage::Cuda(gs), candle_core::Storage::Cuda(rss)) = (&*gst, &*rst)
        else {
            candle_core::bail!("rms-norm backward: the gradient is not on CUDA");
        };
        let chunks = rows.div_ceil(DW_ROWS);
        let out = gpu::launch(gpu::Launch {
            kernel: format!("rmsnorm_dw_rs_{}", gpu::suffix(xs.dtype())?),
            ins: &[(xs, xl), (gs, gl), (rss, rl)],
            out_dtype: DType::F32,
            out_len: chunks * cols,
            grid: chunks * cols.div_ceil(256),
            block: 256,
            n: [rows, cols, DW_ROWS],
            f: 0.0,
        })?;
        Ok((out, Shape::from((chunks, cols))))
    }
}

/// (∂x [+ res], ∂w in f32) of RMSNorm over the last dimension, or `None` where the kernels
/// do not apply (not CUDA, more than 4096 columns, mixed dtypes): the caller uses the
/// general path then.
pub(crate) fn backward(
    x: &Tensor,
    w: &Tensor,
    g: &Tensor,
    eps: f32,
    res: Option<&Tensor>,
) -> Result<Option<(Tensor, Tensor)>> {
    let cols = x.dims().last().copied().unwrap_or(0);
    let same = |t: &Tensor| t.dtype() == x.dtype();
    let ok = x.device().is_cuda()
        && matches!(x.dtype(), DType::F32 | DType::BF16)
        && same(w)
        && same(g)
        && res.is_none_or(|r| same(r) && r.dims() == x.dims())
        && (1..=THREADS * MAX_PER_THREAD).contains(&cols);
    if !ok {
        return Ok(None);
    }
    let rows = x.elem_count() / cols;
    let (x, g) = (x.contiguous()?, g.contiguous()?);
    let res = res.map(|r| r.contiguous()).transpose()?;
    // Every row's inverse RMS is written by the ∂x kernel before the ∂w kernel reads it:
    // no zero fill (one memset node less per norm).
    let rs = {
        let candle_core::Device::Cuda(dev) = x.device() else {
            return Ok(None);
        };
        // SAFETY: written in full by `Dx` before any read.
        let buf =
            candle_core::cuda_backend::WrapErr::w(unsafe { dev.cuda_stream().alloc::<f32>(rows) })?;
        let st = candle_core::CudaStorage::wrap_cuda_slice(buf, dev.clone());
        Tensor::from_storage(
            candle_core::Storage::Cuda(st),
            rows,
            candle_core::op::BackpropOp::none(),
            false,
        )
    };
    let dx = {
        let (st, _) = rs.storage_and_layout();
        let candle_core::Storage::Cuda(cs) = &*st else {
            return Ok(None);
        };
        let op = Dx {
            eps,
            rs: cs.as_cuda_slice::<f32>()?,
            res: res.as_ref(),
        };
        x.apply_op3_no_bwd(&w.contiguous()?, &g, &op)?
    };
    let part = x.apply_op1_no_bwd(&DwPart { g: &g, rs: &rs })?;
    Ok(Some((dx, part.sum(0)?)))
}

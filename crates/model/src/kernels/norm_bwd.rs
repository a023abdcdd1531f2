//! The RMSNorm backward on CUDA. Where rows move 16 bytes per lane (cols a multiple of 8
//! bf16 or 4 f32, aligned), one kernel (fused.cu `rmsnorm_bwd_v`): one warp per row writes
//! ∂x, and each block writes its rows' ∂w partial sums from shared memory; candle sums the
//! partials. Otherwise two kernels with many blocks each (`rmsnorm_dx_rs`, `rmsnorm_dw_rs`):
//! ∂x with each row's inverse RMS (one block per row), then ∂w's partial sums over chunks of
//! rows from x, g and those RMS values. ∂x can take the residual branch's gradient in the
//! same pass (the block's `dx2 = g + ∂norm2` and `dx = dx2 + ∂norm1`).
//! History (nvidia-h200, xl bf16, 97 calls per step): a ∂x kernel plus a ∂w-partials kernel
//! took 4.6 ms (run 17); one kernel walking 4 rows per block, 2.1 ms (run 18) and, holding
//! the 4 rows in registers, 3.5 ms (run 19): a block that reduces rows one after another
//! with block-wide reductions is latency-bound at 1,024 rows. At batch 32 (run 32) the two
//! kernels plus the sum took 6.7 ms, ∂x at 819 GB/s: hence one warp per row, no block-wide
//! reduction. Above 3,072 columns (the 6.7B's 4,096) that kernel's ∂w slices, a warp's columns
//! in f32 in shared memory, leave it three warps a block and 1.56 TB/s (call 291): there
//! `rmsnorm_bwd_w` takes a row with four warps, the ∂w sums in registers. It does below
//! 1,584 rows too, where a warp a row leaves too few warps in flight (xl at 8 × 128 tokens:
//! 1.31 → 0.87 ms a step, call 300; at 8,192 rows it was not faster, so the rows decide).

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

/// Warps per block of the one-kernel backward (at most; fewer where W × cols f32 would pass
/// 48 KiB of shared memory) and the ∂w partials it aims at (rows per warp grow past that).
const WARPS: usize = 4;
const PARTIALS: usize = 512;
/// The wide kernel's 16-byte chunks a thread (norm_bwd.cuh's RW_C) and the blocks it aims at:
/// three on each of an H100's or H200's 132 SMs (164 registers a thread).
const WIDE_CHUNKS: usize = 5;
const WIDE_BLOCKS: usize = 396;

/// Which ∂x kernel, and what it writes into the extra f32 buffer.
#[derive(Clone, Copy)]
enum Kind {
    /// One kernel (`rmsnorm_bwd_v`): one warp per row, `warps` per block, `rpw` rows per
    /// warp; each block's ∂w partial sums (blocks × cols).
    OneKernel { warps: usize, rpw: usize },
    /// `rmsnorm_bwd_w` for wide rows: four warps a block, `rpb` rows per block, the ∂w
    /// sums in registers; each block's ∂w partial sums (blocks × cols).
    Wide { rpb: usize },
    /// `rmsnorm_dx_rs`: one block per row; each row's inverse RMS (rows).
    PerRow,
}

/// ∂x (+ the residual branch's gradient `res`) of (x, w, g), and the extra output `extra`.
struct Dx<'a> {
    eps: f32,
    kind: Kind,
    extra: &'a CudaSlice<f32>,
    res: Option<&'a Tensor>,
}

/// The residual's CUDA storage out of its held storage guard.
fn cuda_res<'a, G: std::ops::Deref<Target = candle_core::Storage>>(
    guard: &'a Option<(G, &'a Layout)>,
) -> candle_core::Result<Option<(&'a candle_core::CudaStorage, &'a Layout)>> {
    match guard {
        Some((st, l)) => match &**st {
            candle_core::Storage::Cuda(c) => {
                super::dense("rms-norm backward", "residual", l)?;
                Ok(Some((c, *l)))
            }
            _ => candle_core::bail!("rms-norm backward: the residual is not on CUDA"),
        },
        None => Ok(None),
    }
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
        super::cuda_only("rms-norm backward")
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
        // (kernel, grid, block, rows per warp, shared bytes, extra slots)
        let (kernel, grid, block, rpw, shared, slots) = match self.kind {
            Kind::OneKernel { warps, rpw } => {
                let blocks = rows.div_ceil(warps * rpw);
                let shared = (warps * cols * 4) as u32;
                (
                    "rmsnorm_bwd_v",
                    blocks,
                    32 * warps,
                    rpw,
                    shared,
                    blocks * cols,
                )
            }
            Kind::Wide { rpb } => {
                let blocks = rows.div_ceil(rpb);
                ("rmsnorm_bwd_w", blocks, 128, rpb, 0, blocks * cols)
            }
            Kind::PerRow => ("rmsnorm_dx_rs", rows, THREADS, 0, 0, rows),
        };
        if self.extra.len() != slots {
            candle_core::bail!(
                "rms-norm backward: {} slots for {slots} ({kernel})",
                self.extra.len()
            );
        }
        let guard = self.res.map(|r| r.storage_and_layout());
        let res = cuda_res(&guard)?;
        let mut ins = vec![(xs, xl), (ws, wl), (gs, gl)];
        ins.extend(res);
        let suffix = if res.is_some() { "_add" } else { "" };
        let out = gpu::launch_extra(
            gpu::Launch {
                kernel: format!("{kernel}{suffix}_{}", gpu::suffix(xs.dtype())?),
                ins: &ins,
                out_dtype: xs.dtype(),
                out_len: rows * cols,
                grid,
                block,
                n: [rows, cols, rpw],
                f: self.eps,
            },
            Some(self.extra),
            shared,
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
        && cols >= 1;
    if !ok {
        return Ok(None);
    }
    let rows = x.elem_count() / cols;
    let (x, w, g) = (x.contiguous()?, w.contiguous()?, g.contiguous()?);
    let res = res.map(|r| r.contiguous()).transpose()?;
    let aligned = |t: &Tensor| gpu::row16(t.layout().start_offset(), t.dtype(), cols);
    let warps = (48 * 1024 / (4 * cols)).min(WARPS);
    let all_aligned = [&x, &w, &g].into_iter().chain(&res).all(aligned);
    let chunk = 16 / x.dtype().size_in_bytes();
    let force = forced();
    let one_kernel = if !all_aligned || warps == 0 {
        None
    } else if (warps < WARPS || rows < 4 * WIDE_BLOCKS || force == Some(Force::Wide))
        && force != Some(Force::One)
        && cols <= 128 * WIDE_CHUNKS * chunk
    {
        // The wide kernel's chunks a thread cover the row, and the one kernel's ∂w slices
        // would leave it fewer than WARPS warps a block (more than 3,072 columns), or its
        // warp a row would leave fewer warps in flight than the wide kernel's blocks of
        // four (xl at 1,024 rows: 1.31 → 0.87 ms a step, call 300).
        let rpb = rows.div_ceil(WIDE_BLOCKS).max(1);
        Some((Kind::Wide { rpb }, rows.div_ceil(rpb)))
    } else {
        // Rows per warp: as few as keep the partials near PARTIALS blocks.
        let rpw = rows.div_ceil(warps * PARTIALS).max(1);
        Some((Kind::OneKernel { warps, rpw }, rows.div_ceil(warps * rpw)))
    };
    if let Some((kind, blocks)) = one_kernel {
        let part = gpu::scratch(&x, blocks * cols)?;
        let dx = gpu::with_slice(&part, |p| {
            let op = Dx {
                eps,
                kind,
                extra: p,
                res: res.as_ref(),
            };
            x.apply_op3_no_bwd(&w, &g, &op)
        })?;
        return Ok(Some((dx, colsum(&part, blocks, cols)?)));
    }
    if cols > THREADS * MAX_PER_THREAD {
        return Ok(None);
    }
    // Every row's inverse RMS is written by the ∂x kernel before the ∂w kernel reads it:
    // no zero fill (one memset node less per norm).
    let rs = gpu::scratch(&x, rows)?;
    let dx = gpu::with_slice(&rs, |rs| {
        let op = Dx {
            eps,
            kind: Kind::PerRow,
            extra: rs,
            res: res.as_ref(),
        };
        x.apply_op3_no_bwd(&w, &g, &op)
    })?;
    let part = x.apply_op1_no_bwd(&DwPart { g: &g, rs: &rs })?;
    Ok(Some((dx, part.sum(0)?)))
}

/// `MODEL_NORM_BWD`: `wide` takes `rmsnorm_bwd_w` wherever its chunks cover the row, `one`
/// `rmsnorm_bwd_v` wherever it fits; unset, the columns and rows choose (a switch for
/// measuring).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Force {
    Wide,
    One,
}

fn forced() -> Option<Force> {
    static F: std::sync::OnceLock<Option<Force>> = std::sync::OnceLock::new();
    *F.get_or_init(|| match std::env::var("MODEL_NORM_BWD").as_deref() {
        Ok("wide") => Some(Force::Wide),
        Ok("one") => Some(Force::One),
        _ => None,
    })
}

/// The column sums (cols,) of the f32 partials `part` (rows × cols, flat): fused.cu
/// `colsum_f32` (candle's sum over the first dimension took 11 µs for 512 × 1600).
fn colsum(part: &Tensor, rows: usize, cols: usize) -> Result<Tensor> {
    let (st, l) = part.storage_and_layout();
    let candle_core::Storage::Cuda(cs) = &*st else {
        return Err(candle_core::Error::Msg("rms-norm backward: not on CUDA".into()).into());
    };
    let out = gpu::launch(gpu::Launch {
        kernel: "colsum_f32".into(),
        ins: &[(cs, l)],
        out_dtype: DType::F32,
        out_len: cols,
        grid: cols.div_ceil(32),
        block: 256,
        n: [rows, cols, 0],
        f: 0.0,
    })?;
    Ok(gpu::tensor(out, cols))
}

//! Causal attention for bf16 on CUDA, from the qkv projection's rows to the heads' output
//! already in the output projection's row layout (b, t, h, e); the backward reads the same
//! rows and the projection's gradient rows as they are, and writes ∂qkv in the qkv rows'
//! layout (∂q, ∂k turned back). Two kinds of kernel, by the sequence t:
//!
//! - t 32 or 96 (fused.cu `attn_fwd_e*_bf16`, `attn_bwd_e*_bf16`; kernels/attn.cuh; any
//!   multiple of 32 up to 128 where `MODEL_ATTN_TILED=0`): one kernel a direction, roping
//!   q and k as it loads the rows; one block per (batch, head), the scores and their
//!   gradient in shared memory as f32; it keeps the probabilities P (b, h, t, t) for the backward. It replaces
//!   the q/k/v split and its merge, six batched GEMMs (76 TFLOP/s at batch 32 on
//!   nvidia-h200, run 32), the two softmax kernels and two head transposes.
//! - t a multiple of 64 (`flash_fwd_e*_bf16`, `flash_bwd_kv_e*_bf16` then
//!   `flash_bwd_q_e*_bf16`, through each pair of tiles' dSᵀ; `flash_fwd2`, `flash_bwd_q2`
//!   with 128 queries a block where t is a multiple of 128;
//!   kernels/flash.cuh on mma.cuh): tiled as FlashAttention-2, no t × t matrix anywhere,
//!   the scores in registers; it keeps each row's log-sum-exp L (b, h, t), f32, and the
//!   backward makes P again from it. The forward first splits the rows into heads
//!   (3, b, h, t, e), q and k roped (`qkv_rope_split`), so that the kernels load each tile
//!   with cp.async while they compute on the last; the backward starts from those heads,
//!   kept in the rows' place (as many elements). Since session 58 it also takes 64 and 128
//!   tokens (`memplan::attention`'s doc has the measurement).
//!   `MODEL_ATTN_TILED=0` turns it off, to measure against: the one-block kernel then takes
//!   64 and 128 tokens, the composed ops longer sequences.
//!
//! Both need e a multiple of 16 up to 128 (the rule: `memplan::attention`, which the memory
//! plan reads too). Where neither applies (not CUDA, not bf16, other shapes) the callers get
//! `None` and compose the ops.

use crate::error::Result;
// Which kernel applies: the rule the memory plan reads too.
use crate::plan::Attention as Kernel;
use candle_core::{DType, Tensor};

/// Whether `MODEL_ATTN_TILED=0` turns the tiled kernel off, read once.
fn tiled_off() -> bool {
    static OFF: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OFF.get_or_init(|| std::env::var("MODEL_ATTN_TILED").as_deref() == Ok("0"))
}

/// The kernel for sequence t and head width e ([`crate::plan::attention`]) on CUDA, if one
/// applies; where `MODEL_ATTN_TILED=0`, the one-block kernel in the tiled one's place up to
/// 128 tokens, and none above.
fn kernel(qkv: &Tensor, t: usize, e: usize) -> Option<Kernel> {
    let bf16 = qkv.device().is_cuda() && qkv.dtype() == DType::BF16;
    match crate::plan::attention(bf16, t, e)? {
        Kernel::Tiled if tiled_off() => crate::plan::whole(t).then_some(Kernel::Whole),
        k => Some(k),
    }
}

/// Softmax(scale · q kᵀ, causal) and its product with v, with q, k, v (q and k roped by the
/// f32 tables cos, sin (t, e/2)) taken from the qkv projection's rows (b·t, 3·h·e): (the
/// backward's input, what else it needs, the heads' output as rows (b·t, h·e)), or `None`
/// where no kernel applies. After the one-block kernel (32 and 96 tokens) the backward starts
/// from the rows themselves and P (b, h, t, t) bf16; after the tiled one (multiples of 64),
/// from the heads the forward split the rows into (3, b, h, t, e), as many elements, and L
/// (b, h, t) f32.
pub(crate) fn forward(
    qkv: &Tensor,
    (b, t, h): (usize, usize, usize),
    [cos, sin]: [&Tensor; 2],
    scale: f64,
) -> Result<Option<(Tensor, Tensor, Tensor)>> {
    let e = qkv.elem_count() / (b * t * 3 * h).max(1);
    let Some(k) = kernel(qkv, t, e) else {
        return Ok(None);
    };
    if qkv.elem_count() != b * t * 3 * h * e {
        return Ok(None);
    }
    imp::forward(k, qkv, (b, t, h, e), [cos, sin], scale)
}

/// ∂qkv (b·t, 3·h·e) in the rows' layout from what [`forward`] returned (its input for the
/// backward, `saved`, and P or L, `kept`), the tables, its output rows y and their gradient
/// dy (both (b·t, h·e)), or `None` where no kernel applies.
pub(crate) fn backward(
    saved: &Tensor,
    (b, t, h): (usize, usize, usize),
    [cos, sin]: [&Tensor; 2],
    kept: &Tensor,
    [y, dy]: [&Tensor; 2],
    scale: f64,
) -> Result<Option<Tensor>> {
    let e = saved.elem_count() / (b * t * 3 * h).max(1);
    let bf16 = |t: &Tensor| t.dtype() == DType::BF16;
    let Some(k) = kernel(saved, t, e) else {
        return Ok(None);
    };
    let kept_ok = match k {
        Kernel::Whole => bf16(kept) && kept.dims() == [b, h, t, t],
        Kernel::Tiled => kept.dtype() == DType::F32 && kept.dims() == [b, h, t],
    };
    if !kept_ok || !bf16(y) || !bf16(dy) {
        return Ok(None);
    }
    imp::backward(k, saved, (b, t, h, e), [cos, sin], kept, [y, dy], scale)
}

#[cfg(not(feature = "cuda"))]
mod imp {
    use super::*;
    type Dims = (usize, usize, usize, usize);
    pub(super) fn forward(
        _: Kernel,
        _: &Tensor,
        _: Dims,
        _: [&Tensor; 2],
        _: f64,
    ) -> Result<Option<(Tensor, Tensor, Tensor)>> {
        Ok(None)
    }
    pub(super) fn backward(
        _: Kernel,
        _: &Tensor,
        _: Dims,
        _: [&Tensor; 2],
        _: &Tensor,
        _: [&Tensor; 2],
        _: f64,
    ) -> Result<Option<Tensor>> {
        Ok(None)
    }
}

#[cfg(feature = "cuda")]
mod imp {
    use super::super::attn_geometry::{dot_lanes, query_tiles, shared, shared_q, TILE};
    use super::super::gpu;
    use super::*;
    use candle_core::backend::BackendStorage;
    use candle_core::cuda_backend::cudarc::driver::CudaSlice;
    use candle_core::{CudaStorage, Layout, Storage};

    /// Runs `f` on the CUDA storages of `ts` (contiguous, 32-byte aligned: the tiles load
    /// 32 bytes at a time), or returns `None` when one is not.
    fn with_cuda<R>(
        ts: &[&Tensor],
        f: impl FnOnce(&[(&CudaStorage, &Layout)]) -> candle_core::Result<R>,
    ) -> Result<Option<R>> {
        let guards: Vec<_> = ts.iter().map(|t| t.storage_and_layout()).collect();
        let mut ins = Vec::with_capacity(ts.len());
        for (g, l) in &guards {
            let Storage::Cuda(c) = &**g else {
                return Ok(None);
            };
            let bytes = l.start_offset() * c.dtype().size_in_bytes();
            if !l.is_contiguous() || !bytes.is_multiple_of(32) {
                return Ok(None);
            }
            ins.push((c, *l));
        }
        Ok(Some(f(&ins)?))
    }

    /// Launches kernel `k`'s forward or backward for head width e (`extra`: the tiled
    /// forward's L); `None` where an input is not contiguous and aligned, and for the tiled
    /// backward, which is [`tiled_backward`]'s two launches. Whole: one block per (batch,
    /// head), t / 16 warps. Tiled forward: a block of four warps per (batch, head,
    /// [`query_tiles`]).
    fn launch(
        k: Kernel,
        ins: &[&Tensor],
        backward: bool,
        out_len: usize,
        (b, t, h, e): (usize, usize, usize, usize),
        scale: f64,
        extra: Option<&CudaSlice<f32>>,
    ) -> Result<Option<CudaStorage>> {
        let dir = if backward { "bwd" } else { "fwd" };
        let (name, grid, block, suffix) = match (k, backward) {
            (Kernel::Whole, _) => ("attn", b * h, 32 * (t / 16), ""),
            (Kernel::Tiled, false) => {
                let (m, suffix) = query_tiles(t);
                ("flash", b * h * (t / TILE / m), 128, suffix)
            }
            (Kernel::Tiled, true) => return Ok(None),
        };
        with_cuda(ins, |ins| {
            gpu::launch_extra(
                gpu::Launch {
                    kernel: format!("{name}_{dir}{suffix}_e{e}_bf16"),
                    ins,
                    out_dtype: DType::BF16,
                    out_len,
                    grid,
                    block,
                    n: [b, h, t],
                    f: scale as f32,
                },
                extra,
                shared(k, t, e, backward),
            )
        })
    }

    /// D = dY · Y of every row and head, (b, h, t) f32 (`flash_dot_e*_bf16`).
    fn dot(
        (b, t, h, e): (usize, usize, usize, usize),
        y: &Tensor,
        dy: &Tensor,
    ) -> Result<Option<Tensor>> {
        let d = with_cuda(&[y, dy], |ins| {
            gpu::launch(gpu::Launch {
                kernel: format!("flash_dot_e{e}_bf16"),
                ins,
                out_dtype: DType::F32,
                out_len: b * h * t,
                grid: (b * t * h * dot_lanes(e)).div_ceil(256),
                block: 256,
                n: [b, h, t],
                f: 0.0,
            })
        })?;
        Ok(d.map(|d| gpu::tensor(d, (b, h, t))))
    }

    /// q, k (roped) and v as (3, b, h, t, e) from the rows (`qkv_rope_split`): the tiled
    /// kernels' input, 64 contiguous rows a tile, kept for the backward in the rows' place.
    fn heads(
        qkv: &Tensor,
        (b, t, h, e): (usize, usize, usize, usize),
        cos: &Tensor,
        sin: &Tensor,
    ) -> Result<Tensor> {
        let rows = qkv.detach().reshape((b, t, 3 * h * e))?;
        super::super::qkv_rope(&rows, h, cos, sin)
    }

    fn tables(cos: &Tensor, sin: &Tensor) -> Result<(Tensor, Tensor)> {
        let f = |t: &Tensor| t.to_dtype(DType::F32)?.contiguous();
        Ok((f(cos)?, f(sin)?))
    }

    pub(super) fn forward(
        k: Kernel,
        qkv: &Tensor,
        (b, t, h, e): (usize, usize, usize, usize),
        [cos, sin]: [&Tensor; 2],
        scale: f64,
    ) -> Result<Option<(Tensor, Tensor, Tensor)>> {
        let (cos, sin) = tables(cos, sin)?;
        if cos.dims() != [t, e / 2] || sin.dims() != [t, e / 2] {
            return Ok(None);
        }
        let qkv = qkv.contiguous()?;
        let (dims, ins) = ((b, t, h, e), [&qkv, &cos, &sin]);
        let ny = b * t * h * e;
        if k == Kernel::Tiled {
            let heads = heads(&qkv, dims, &cos, &sin)?;
            let l = gpu::scratch(&qkv, b * h * t)?;
            let y = gpu::with_slice(&l, |l| {
                Ok(launch(k, &[&heads], false, ny, dims, scale, Some(l)))
            })??;
            let Some(y) = y else { return Ok(None) };
            let y = gpu::tensor(y, (b * t, h * e));
            return Ok(Some((heads, l.reshape((b, h, t))?, y)));
        }
        let np = b * h * t * t;
        let out = launch(k, &ins, false, np + ny, dims, scale, None)?;
        let Some(out) = out else { return Ok(None) };
        let out = gpu::tensor(out, np + ny);
        let p = out.narrow(0, 0, np)?.reshape((b, h, t, t))?;
        let y = out.narrow(0, np, ny)?.reshape((b * t, h * e))?;
        Ok(Some((qkv, p, y)))
    }

    pub(super) fn backward(
        k: Kernel,
        saved: &Tensor,
        (b, t, h, e): (usize, usize, usize, usize),
        [cos, sin]: [&Tensor; 2],
        kept: &Tensor,
        [y, dy]: [&Tensor; 2],
        scale: f64,
    ) -> Result<Option<Tensor>> {
        let (cos, sin) = tables(cos, sin)?;
        let rows = b * t * h * e;
        if y.elem_count() != rows || dy.elem_count() != rows || cos.dims() != [t, e / 2] {
            return Ok(None);
        }
        let c = |t: &Tensor| t.contiguous();
        let (saved, kept, y, dy) = (c(saved)?, c(kept)?, c(y)?, c(dy)?);
        // The tiled backward reads D = dY · Y of each row and head, made first.
        let d = match k {
            Kernel::Whole => y,
            Kernel::Tiled => match dot((b, t, h, e), &y, &dy)? {
                Some(d) => d,
                None => return Ok(None),
            },
        };
        let ins = [&saved, &cos, &sin, &kept, &d, &dy];
        let out = match k {
            Kernel::Whole => launch(k, &ins, true, 3 * rows, (b, t, h, e), scale, None)?,
            Kernel::Tiled => tiled_backward(&ins, (b, t, h, e), scale)?,
        };
        Ok(out.map(|o| gpu::tensor(o, (b * t, 3 * h * e))))
    }

    /// The tiled backward's two launches (flash.cuh) from [heads, cos, sin, L, D, dY]:
    /// `flash_bwd_kv` (∂k, ∂v, and every tile pair's dSᵀ into a bf16 buffer of b·h·P·64²,
    /// P = n (n + 1) / 2 pairs of n = t / 64 tiles), then `flash_bwd_q` (∂q from dSᵀ and
    /// k, [`query_tiles`] a block) into the same ∂qkv rows.
    fn tiled_backward(
        ins: &[&Tensor],
        (b, t, h, e): (usize, usize, usize, usize),
        scale: f64,
    ) -> Result<Option<CudaStorage>> {
        let n = t / TILE;
        let pairs = b * h * n * (n + 1) / 2 * TILE * TILE;
        with_cuda(ins, |ins| {
            use candle_core::cuda_backend::WrapErr;
            let dev = ins[0].0.device.clone();
            let stream = dev.cuda_stream();
            // SAFETY: flash_bwd_kv writes every pair's dSᵀ and every row's ∂k and ∂v, then
            // flash_bwd_q every row's ∂q, before anything reads them.
            let mut ds = unsafe { stream.alloc::<half::bf16>(pairs) }.w()?;
            let mut out = unsafe { stream.alloc::<half::bf16>(3 * b * t * h * e) }.w()?;
            let launch = |kernel: &str, blocks, ins| gpu::Launch {
                kernel: format!("{kernel}_e{e}_bf16"),
                ins,
                out_dtype: DType::BF16,
                out_len: 0,
                grid: blocks,
                block: 128,
                n: [b, h, t],
                f: scale as f32,
            };
            let kv = launch("flash_bwd_kv", b * h * n, ins);
            gpu::launch_outs(
                kv,
                &mut [&mut ds, &mut out],
                shared(Kernel::Tiled, t, e, true),
            )?;
            let ds = CudaStorage::wrap_cuda_slice(ds, dev.clone());
            let layout = Layout::contiguous(pairs);
            let q_ins = [ins[0], ins[1], ins[2], (&ds, &layout)];
            let (m, suffix) = query_tiles(t);
            let q = launch(&format!("flash_bwd_q{suffix}"), b * h * n / m, &q_ins);
            gpu::launch_outs(q, &mut [&mut out], shared_q(t, e))?;
            Ok(CudaStorage::wrap_cuda_slice(out, dev))
        })
    }
}

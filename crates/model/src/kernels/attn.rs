//! Causal attention for bf16 on CUDA in one kernel per direction (fused.cu `attn_fwd_e*_bf16`,
//! `attn_bwd_e*_bf16`; kernels/attn.cuh): tensor-core tiles (wmma), one block per (batch,
//! head), the scores and their gradient in shared memory as f32. The forward reads q, k, v
//! straight from the qkv projection's rows, roping q and k as it loads them, and writes the
//! probabilities P (kept for the backward, as before) and the heads' output already in the
//! output projection's row layout (b, t, h, e); the backward reads the same rows and the
//! projection's gradient rows as they are, and writes ∂qkv in the qkv rows' layout (∂q, ∂k
//! turned back). It replaces, per block, the q/k/v split and its merge (qkv_rope), six
//! batched GEMMs (76 TFLOP/s at batch 32 on nvidia-h200, run 32), the two softmax kernels and
//! two head transposes. Where it does not apply (not CUDA, not bf16, t not a
//! multiple of 32 up to 128, e not a multiple of 16 up to 128) the callers get `None` and
//! compose the ops.

use crate::error::Result;
use candle_core::{DType, Tensor};

/// The kernels' limits: bf16 on CUDA, t a multiple of 32 (query strips of 16 in pairs), e of
/// 16 (one kernel per width), both at most 128.
fn applies(qkv: &Tensor, t: usize, e: usize) -> bool {
    let fits = |n: usize, m: usize| n.is_multiple_of(m) && (m..=128).contains(&n);
    qkv.device().is_cuda() && qkv.dtype() == DType::BF16 && fits(t, 32) && fits(e, 16)
}

/// Softmax(scale · q kᵀ, causal) and its product with v, with q, k, v (q and k roped by the
/// f32 tables cos, sin (t, e/2)) taken from the qkv projection's rows (b·t, 3·h·e):
/// (P (b, h, t, t), the heads' output as rows (b·t, h·e)), or `None` where the kernel does
/// not apply.
pub(crate) fn forward(
    qkv: &Tensor,
    (b, t, h): (usize, usize, usize),
    [cos, sin]: [&Tensor; 2],
    scale: f64,
) -> Result<Option<(Tensor, Tensor)>> {
    let e = qkv.elem_count() / (b * t * 3 * h).max(1);
    if !applies(qkv, t, e) || qkv.elem_count() != b * t * 3 * h * e {
        return Ok(None);
    }
    imp::forward(qkv, (b, t, h, e), [cos, sin], scale)
}

/// ∂qkv (b·t, 3·h·e) in the rows' layout from the rows, the tables, the forward's P, its
/// output rows y and their gradient dy (both (b·t, h·e)), or `None` where the kernel does
/// not apply.
pub(crate) fn backward(
    qkv: &Tensor,
    (b, t, h): (usize, usize, usize),
    [cos, sin]: [&Tensor; 2],
    p: &Tensor,
    [y, dy]: [&Tensor; 2],
    scale: f64,
) -> Result<Option<Tensor>> {
    let e = qkv.elem_count() / (b * t * 3 * h).max(1);
    let bf16 = |t: &Tensor| t.dtype() == DType::BF16;
    if !applies(qkv, t, e) || !bf16(p) || !bf16(y) || !bf16(dy) {
        return Ok(None);
    }
    imp::backward(qkv, (b, t, h, e), [cos, sin], p, [y, dy], scale)
}

#[cfg(not(feature = "cuda"))]
mod imp {
    use super::*;
    type Dims = (usize, usize, usize, usize);
    pub(super) fn forward(
        _: &Tensor,
        _: Dims,
        _: [&Tensor; 2],
        _: f64,
    ) -> Result<Option<(Tensor, Tensor)>> {
        Ok(None)
    }
    pub(super) fn backward(
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
    use super::super::gpu;
    use super::*;
    use candle_core::backend::BackendStorage;
    use candle_core::{CudaStorage, Layout, Storage};

    /// Bytes of dynamic shared memory (attn.cuh): k, v and q staged, t rows of e + 8 each
    /// (the backward puts dY in v's place); forward, per pair of query strips (t / 32 of
    /// them) an f32 strip of 16 rows of max(t, e) + 4 and a bf16 strip of 16 rows of t + 8;
    /// backward, dS (t rows of t + 8) and per pair an f32 strip of 16 rows of max(e, 32) + 4.
    fn shared(t: usize, e: usize, backward: bool) -> u32 {
        let (w, staged) = (t / 32, 3 * t * (e + 8) * 2);
        let bytes = if backward {
            staged + t * (t + 8) * 2 + w * 16 * (e.max(32) + 4) * 4
        } else {
            staged + w * 16 * (t.max(e) + 4) * 4 + w * 16 * (t + 8) * 2
        };
        bytes as u32
    }

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

    /// Launches the forward or backward kernel for head width e: one block per (batch,
    /// head), t / 16 warps; `None` where an input is not contiguous and aligned.
    fn launch(
        ins: &[&Tensor],
        backward: bool,
        out_len: usize,
        (b, t, h, e): (usize, usize, usize, usize),
        scale: f64,
    ) -> Result<Option<CudaStorage>> {
        let dir = if backward { "bwd" } else { "fwd" };
        with_cuda(ins, |ins| {
            gpu::launch_extra(
                gpu::Launch {
                    kernel: format!("attn_{dir}_e{e}_bf16"),
                    ins,
                    out_dtype: DType::BF16,
                    out_len,
                    grid: b * h,
                    block: 32 * (t / 16),
                    n: [b, h, t],
                    f: scale as f32,
                },
                None,
                shared(t, e, backward),
            )
        })
    }

    fn tables(cos: &Tensor, sin: &Tensor) -> Result<(Tensor, Tensor)> {
        let f = |t: &Tensor| t.to_dtype(DType::F32)?.contiguous();
        Ok((f(cos)?, f(sin)?))
    }

    pub(super) fn forward(
        qkv: &Tensor,
        (b, t, h, e): (usize, usize, usize, usize),
        [cos, sin]: [&Tensor; 2],
        scale: f64,
    ) -> Result<Option<(Tensor, Tensor)>> {
        let (cos, sin) = tables(cos, sin)?;
        if cos.dims() != [t, e / 2] || sin.dims() != [t, e / 2] {
            return Ok(None);
        }
        let qkv = qkv.contiguous()?;
        let (np, ny) = (b * h * t * t, b * t * h * e);
        let out = launch(&[&qkv, &cos, &sin], false, np + ny, (b, t, h, e), scale)?;
        let Some(out) = out else { return Ok(None) };
        let out = gpu::tensor(out, np + ny);
        let p = out.narrow(0, 0, np)?.reshape((b, h, t, t))?;
        let y = out.narrow(0, np, ny)?.reshape((b * t, h * e))?;
        Ok(Some((p, y)))
    }

    pub(super) fn backward(
        qkv: &Tensor,
        (b, t, h, e): (usize, usize, usize, usize),
        [cos, sin]: [&Tensor; 2],
        p: &Tensor,
        [y, dy]: [&Tensor; 2],
        scale: f64,
    ) -> Result<Option<Tensor>> {
        let (cos, sin) = tables(cos, sin)?;
        let rows = b * t * h * e;
        if p.dims() != [b, h, t, t]
            || y.elem_count() != rows
            || dy.elem_count() != rows
            || cos.dims() != [t, e / 2]
        {
            return Ok(None);
        }
        let c = |t: &Tensor| t.contiguous();
        let (qkv, p, y, dy) = (c(qkv)?, c(p)?, c(y)?, c(dy)?);
        let out = launch(
            &[&qkv, &cos, &sin, &p, &y, &dy],
            true,
            3 * rows,
            (b, t, h, e),
            scale,
        )?;
        Ok(out.map(|o| gpu::tensor(o, (b * t, 3 * h * e))))
    }
}

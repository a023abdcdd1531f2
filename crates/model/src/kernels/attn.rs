//! Causal attention for bf16 on CUDA in one kernel per direction (fused.cu `attn_fwd_e*_bf16`,
//! `attn_bwd_e*_bf16`; kernels/attn.cuh): tensor-core tiles (wmma), one block per (batch,
//! head), the scores and their gradient in shared memory as f32. The forward writes the
//! probabilities P (kept for the backward, as before) and the heads' output already in the
//! output projection's row layout (b, t, h, e); the backward reads the projection's
//! gradient rows as they are and writes ∂q, ∂k, ∂v in one buffer. It replaces, per block,
//! six batched GEMMs (76 TFLOP/s at batch 32 on nvidia-h200, run 32), the two softmax
//! kernels and two head transposes. Where it does not apply (not CUDA, not bf16, t not a
//! multiple of 32 up to 128, e not a multiple of 16 up to 128) the callers get `None` and
//! compose the ops.

use crate::error::Result;
use candle_core::{DType, Tensor};

/// The kernels' limits: t a multiple of 32 (query strips of 16 in pairs), e of 16 (one
/// kernel per width), both at most 128.
fn applies(q: &Tensor) -> bool {
    let d = q.dims();
    let fits = |n: usize, m: usize| n.is_multiple_of(m) && (m..=128).contains(&n);
    q.device().is_cuda()
        && q.dtype() == DType::BF16
        && d.len() == 4
        && fits(d[2], 32)
        && fits(d[3], 16)
}

/// Softmax(scale · q kᵀ, causal) and its product with v, from q, k, v (b, h, t, e) bf16:
/// (P (b, h, t, t), the heads' output as rows (b·t, h·e)), or `None` where the kernel does
/// not apply.
pub(crate) fn forward(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    scale: f64,
) -> Result<Option<(Tensor, Tensor)>> {
    if !applies(q) || k.dims() != q.dims() || v.dims() != q.dims() {
        return Ok(None);
    }
    imp::forward(q, k, v, scale)
}

/// ∂q, ∂k, ∂v (b, h, t, e) from q, k, v, the forward's P, its output rows y and their
/// gradient dy (both (b·t, h·e)), or `None` where the kernel does not apply.
pub(crate) fn backward(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    p: &Tensor,
    [y, dy]: [&Tensor; 2],
    scale: f64,
) -> Result<Option<(Tensor, Tensor, Tensor)>> {
    let bf16 = |t: &Tensor| t.dtype() == DType::BF16;
    if !applies(q) || !bf16(p) || !bf16(y) || !bf16(dy) {
        return Ok(None);
    }
    imp::backward(q, k, v, p, [y, dy], scale)
}

#[cfg(not(feature = "cuda"))]
mod imp {
    use super::*;
    pub(super) fn forward(
        _: &Tensor,
        _: &Tensor,
        _: &Tensor,
        _: f64,
    ) -> Result<Option<(Tensor, Tensor)>> {
        Ok(None)
    }
    pub(super) fn backward(
        _: &Tensor,
        _: &Tensor,
        _: &Tensor,
        _: &Tensor,
        _: [&Tensor; 2],
        _: f64,
    ) -> Result<Option<(Tensor, Tensor, Tensor)>> {
        Ok(None)
    }
}

#[cfg(feature = "cuda")]
mod imp {
    use super::super::gpu;
    use super::*;
    use candle_core::{CudaStorage, Layout, Storage};

    /// Bytes of dynamic shared memory (attn.cuh): the staged operands, t rows of e + 8 each
    /// (forward k, v; backward k, v then dY, and q); forward, per pair of query strips (t /
    /// 32 of them) an f32 strip of 16 rows of max(t, e) + 4 and a bf16 strip of 16 rows of
    /// t + 8; backward, dS (t rows of t + 8) and per pair an f32 strip of 16 rows of
    /// max(e, 32) + 4.
    fn shared(t: usize, e: usize, backward: bool) -> u32 {
        let (w, staged) = (t / 32, t * (e + 8) * 2);
        let bytes = if backward {
            3 * staged + t * (t + 8) * 2 + w * 16 * (e.max(32) + 4) * 4
        } else {
            2 * staged + w * 16 * (t.max(e) + 4) * 4 + w * 16 * (t + 8) * 2
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
            if !l.is_contiguous() || !(l.start_offset() * 2).is_multiple_of(32) {
                return Ok(None);
            }
            ins.push((c, *l));
        }
        Ok(Some(f(&ins)?))
    }

    fn tensor(s: CudaStorage, shape: &[usize]) -> Tensor {
        Tensor::from_storage(
            Storage::Cuda(s),
            shape,
            candle_core::op::BackpropOp::none(),
            false,
        )
    }

    pub(super) fn forward(
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        scale: f64,
    ) -> Result<Option<(Tensor, Tensor)>> {
        let (b, h, t, e) = q.dims4()?;
        let (q, k, v) = (q.contiguous()?, k.contiguous()?, v.contiguous()?);
        let out = with_cuda(&[&q, &k, &v], |ins| {
            gpu::launch_extra(
                gpu::Launch {
                    kernel: format!("attn_fwd_e{e}_bf16"),
                    ins,
                    out_dtype: DType::BF16,
                    out_len: b * h * t * t + b * t * h * e,
                    grid: b * h,
                    block: 32 * (t / 16),
                    n: [b, h, t],
                    f: scale as f32,
                },
                None,
                shared(t, e, false),
            )
        })?;
        let Some(out) = out else { return Ok(None) };
        let out = tensor(out, &[b * h * t * t + b * t * h * e]);
        let p = out.narrow(0, 0, b * h * t * t)?.reshape((b, h, t, t))?;
        let y = out
            .narrow(0, b * h * t * t, b * t * h * e)?
            .reshape((b * t, h * e))?;
        Ok(Some((p, y)))
    }

    pub(super) fn backward(
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        p: &Tensor,
        [y, dy]: [&Tensor; 2],
        scale: f64,
    ) -> Result<Option<(Tensor, Tensor, Tensor)>> {
        let (b, h, t, e) = q.dims4()?;
        if k.dims() != q.dims()
            || v.dims() != q.dims()
            || p.dims() != [b, h, t, t]
            || y.elem_count() != b * t * h * e
            || dy.elem_count() != b * t * h * e
        {
            return Ok(None);
        }
        let c = |t: &Tensor| t.contiguous();
        let (q, k, v, p, y, dy) = (c(q)?, c(k)?, c(v)?, c(p)?, c(y)?, c(dy)?);
        let out = with_cuda(&[&q, &k, &v, &p, &y, &dy], |ins| {
            gpu::launch_extra(
                gpu::Launch {
                    kernel: format!("attn_bwd_e{e}_bf16"),
                    ins,
                    out_dtype: DType::BF16,
                    out_len: 3 * b * h * t * e,
                    grid: b * h,
                    block: 32 * (t / 16),
                    n: [b, h, t],
                    f: scale as f32,
                },
                None,
                shared(t, e, true),
            )
        })?;
        let Some(out) = out else { return Ok(None) };
        let out = tensor(out, &[3, b, h, t, e]);
        Ok(Some((out.get(0)?, out.get(1)?, out.get(2)?)))
    }
}

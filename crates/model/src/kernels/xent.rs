//! Cross-entropy over f32 logits (N, V) with u32 targets (N,): one kernel computes each
//! row's loss logsumexp(l) − l[target]; backward one kernel, ∂l = g_row · (softmax(l) −
//! onehot(target)), recomputing logsumexp instead of keeping log-softmax (N × V) alive.
//! Replaces candle-nn's log_softmax + gather composition.

use super::f32s;
use crate::error::Result;
#[cfg(feature = "cuda")]
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp2, CustomOp3, DType, Layout, Shape, Tensor};

struct Fwd;
struct Bwd;

/// (rows, vocab) after checking logits (N, V) against targets (N,).
fn dims(ll: &Layout, tl: &Layout) -> candle_core::Result<(usize, usize)> {
    let (l, t) = (ll.shape().dims(), tl.shape().dims());
    if l.len() != 2 || t != [l[0]] {
        candle_core::bail!(
            "cross_entropy: logits must be (N, V) and targets (N,), got {l:?} and {t:?}"
        );
    }
    Ok((l[0], l[1]))
}

fn u32s<'a>(s: &'a CpuStorage, l: &Layout, vocab: usize) -> candle_core::Result<&'a [u32]> {
    super::u32s_below("cross_entropy", "target", s, l, vocab, "classes")
}

fn lse(row: &[f32]) -> f32 {
    let m = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    m + row.iter().map(|v| (v - m).exp()).sum::<f32>().ln()
}

impl CustomOp2 for Fwd {
    fn name(&self) -> &'static str {
        "cross-entropy"
    }
    fn cpu_fwd(
        &self,
        ls: &CpuStorage,
        ll: &Layout,
        ts: &CpuStorage,
        tl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (n, v) = dims(ll, tl)?;
        let (l, t) = (f32s("cross_entropy", "logits", ls, ll)?, u32s(ts, tl, v)?);
        let loss = (0..n)
            .map(|r| {
                let row = &l[r * v..(r + 1) * v];
                lse(row) - row[t[r] as usize]
            })
            .collect();
        Ok((CpuStorage::F32(loss), Shape::from(n)))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        ls: &candle_core::CudaStorage,
        ll: &Layout,
        ts: &candle_core::CudaStorage,
        tl: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        super::dense("cross_entropy", "logits", ll)?;
        super::dense("cross_entropy", "targets", tl)?;
        let (n, v) = dims(ll, tl)?;
        let out = super::gpu::launch(super::gpu::Launch {
            kernel: format!("xent_fwd_{}", super::gpu::suffix(ls.dtype())?),
            ins: &[(ls, ll), (ts, tl)],
            out_dtype: DType::F32,
            out_len: n,
            grid: n,
            block: super::BLOCK,
            n: [n, v, 0],
            f: 0.0,
        })?;
        Ok((out, Shape::from(n)))
    }
    fn bwd(
        &self,
        logits: &Tensor,
        targets: &Tensor,
        _loss: &Tensor,
        g: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let dl = logits.apply_op3_no_bwd(targets, &g.contiguous()?, &Bwd)?;
        Ok((Some(dl), None))
    }
}

impl CustomOp3 for Bwd {
    fn name(&self) -> &'static str {
        "cross-entropy-bwd"
    }
    fn cpu_fwd(
        &self,
        ls: &CpuStorage,
        ll: &Layout,
        ts: &CpuStorage,
        tl: &Layout,
        gs: &CpuStorage,
        gl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (n, v) = dims(ll, tl)?;
        let l = f32s("cross_entropy bwd", "logits", ls, ll)?;
        let (t, g) = (u32s(ts, tl, v)?, f32s("cross_entropy bwd", "grad", gs, gl)?);
        let mut dl = vec![0f32; n * v];
        for r in 0..n {
            let (row, out) = (&l[r * v..(r + 1) * v], &mut dl[r * v..(r + 1) * v]);
            let m = lse(row);
            for (o, x) in out.iter_mut().zip(row) {
                *o = g[r] * (x - m).exp();
            }
            out[t[r] as usize] -= g[r];
        }
        Ok((CpuStorage::F32(dl), ll.shape().clone()))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        ls: &candle_core::CudaStorage,
        ll: &Layout,
        ts: &candle_core::CudaStorage,
        tl: &Layout,
        gs: &candle_core::CudaStorage,
        gl: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        for (what, l) in [("logits", ll), ("targets", tl), ("grad", gl)] {
            super::dense("cross_entropy bwd", what, l)?;
        }
        let (n, v) = dims(ll, tl)?;
        let out = super::gpu::launch(super::gpu::Launch {
            kernel: format!("xent_bwd_{}", super::gpu::suffix(ls.dtype())?),
            ins: &[(ls, ll), (ts, tl), (gs, gl)],
            out_dtype: ls.dtype(),
            out_len: n * v,
            grid: n,
            block: super::BLOCK,
            n: [n, v, 0],
            f: 0.0,
        })?;
        Ok((out, ll.shape().clone()))
    }
}

/// Mean cross-entropy of logits (N, V) (any float dtype, computed in f32) against u32
/// targets (N,), as candle-nn's `cross_entropy`. On the GPU the caller validates targets
/// (an out-of-range one gives NaN, never an out-of-bounds read); on the CPU it is an error.
/// bf16 logits on CUDA are read as they are and get a bf16 gradient (the same values as
/// casting them to f32 first: the cast is exact, and the gradient is rounded once either
/// way); elsewhere they are cast to f32.
pub fn cross_entropy(logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
    let logits = as_read(logits)?;
    Ok(logits.apply_op2(&targets.contiguous()?, Fwd)?.mean_all()?)
}

/// Logits as the kernels read them: bf16 on CUDA as they are, f32 otherwise; contiguous.
fn as_read(logits: &Tensor) -> Result<Tensor> {
    let keep = logits.device().is_cuda() && logits.dtype() == DType::BF16;
    Ok(if keep {
        logits.contiguous()?
    } else {
        logits.to_dtype(DType::F32)?.contiguous()?
    })
}

/// Each row's loss (N,), f32, without autograd (for a hand-written backward).
pub(crate) fn rows(logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
    Ok(as_read(logits)?.apply_op2_no_bwd(&targets.contiguous()?, &Fwd)?)
}

/// ∂loss/∂logits from each row's loss gradient `g` (N,) f32: g_r · (softmax − onehot),
/// in the dtype the kernels read the logits in.
pub(crate) fn rows_grad(logits: &Tensor, targets: &Tensor, g: &Tensor) -> Result<Tensor> {
    Ok(as_read(logits)?.apply_op3_no_bwd(&targets.contiguous()?, &g.contiguous()?, &Bwd)?)
}

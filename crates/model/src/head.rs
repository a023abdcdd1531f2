//! The last stage with a hand-written backward, as block.rs does for blocks: the final
//! RMSNorm, the untied head and the mean cross-entropy. Under candle's autograd this stage
//! cost the bf16 step about 0.9 ms of broadcast adds, casts and gradient accumulations
//! (docs/results/single-gpu-h200.md, run 27) and kept the graph's intermediates alive at
//! the backward's start, where memory peaks. Here the backward is the cross-entropy
//! kernel's backward, two GEMMs and the fused RMSNorm backward, and the logits are freed
//! as soon as their gradient exists.
//!
//! Shapes: x (b, t, d), rows n = b·t, vocabulary v.

use crate::error::Result;
use crate::profile::mark;
use crate::staged::SavedStage;
use crate::{gemm, kernels, rmsnorm};
use candle_core::{DType, Tensor};

/// The stage's weights in the compute dtype (detached) and their parameter indices.
pub(crate) struct HeadWeights {
    /// (final norm, head).
    pub w: [Tensor; 2],
    pub ids: [usize; 2],
}

/// What the forward keeps.
struct Saved {
    w: HeadWeights,
    eps: f32,
    shape: (usize, usize, usize),
    /// Input rows (n, d), their norm (n, d), the logits (n, v), the targets (n,).
    x: Tensor,
    h: Tensor,
    logits: Tensor,
    targets: Tensor,
}

/// The stage's forward on x (b, t, d) with `targets` (b, t); returns the mean loss (an
/// f32 scalar) and the saved state.
pub(crate) fn forward(
    x: &Tensor,
    targets: &Tensor,
    w: HeadWeights,
    eps: f32,
) -> Result<(Tensor, Box<dyn SavedStage>)> {
    let (b, t, d) = x.dims3()?;
    let [norm, head] = &w.w;
    let x = x.reshape((b * t, d))?;
    let h = rmsnorm::rms_norm_fused(&x, norm, eps as f64)?;
    mark("fwd/head/norm");
    let logits = gemm::linear(&h, head, None)?;
    mark("fwd/head/proj");
    let targets = targets.flatten_all()?;
    let loss = kernels::xent::rows(&logits, &targets)?.mean_all()?;
    mark("fwd/head/loss");
    let saved = Saved {
        w,
        eps,
        shape: (b, t, d),
        x,
        h,
        logits,
        targets,
    };
    Ok((loss, Box::new(saved)))
}

impl SavedStage for Saved {
    fn backward(
        self: Box<Self>,
        upstream: Option<&Tensor>,
    ) -> Result<(Tensor, Vec<(usize, Tensor)>)> {
        let Saved {
            w,
            eps,
            shape: (b, t, d),
            x,
            h,
            logits,
            targets,
        } = *self;
        let [norm, head] = &w.w;
        let n = b * t;
        let dev = logits.device().clone();
        // ∂loss/∂(row loss) = upstream / n (the loss is the rows' mean).
        let g_rows = match upstream {
            None => Tensor::full(1.0 / n as f32, n, &dev)?,
            Some(u) => (u.to_dtype(DType::F32)?.affine(1.0 / n as f64, 0.0)?)
                .broadcast_as(n)?
                .contiguous()?,
        };
        let dlogits = kernels::xent::rows_grad(&logits, &targets, &g_rows)?;
        drop(logits);
        let dlogits = dlogits.to_dtype(h.dtype())?;
        mark("bwd/head/loss");
        let dhead = gemm::weight_grads(&[&dlogits], &h)?.remove(0);
        let dh = gemm::matmul(&dlogits, head, None)?;
        drop(dlogits);
        mark("bwd/head/proj");
        let (dx, dnorm) = rmsnorm::backward(&x, norm, &dh, eps)?;
        mark("bwd/head/norm");
        let dx = dx.reshape((b, t, d))?;
        Ok((dx, vec![(w.ids[0], dnorm), (w.ids[1], dhead)]))
    }
}

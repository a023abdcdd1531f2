//! One Transformer block with a hand-written backward: the forward runs on detached
//! tensors (no autograd graph) and keeps exactly what the backward needs; the backward is
//! explicit GEMMs plus the fused kernels' backward directions. Against candle's autograd it
//! saves, per block, the zero-fill-and-add of every gradient, the transposed copies of
//! weight gradients and the graph's extra intermediates. The LM uses it where the fused
//! kernels exist (CUDA; f32 on CPU); `tests/lm.rs` checks it against autograd.
//!
//! Shapes: x (b, t, d), rows = b·t; heads h of width e = d/h.

use crate::error::Result;
use crate::profile::mark;
use crate::staged::SavedStage;
use crate::{gemm, kernels, rmsnorm};
use candle_core::Tensor;
use seam::accum::Accumulator;

/// A block's weights in the compute dtype (detached) and their parameter indices.
pub(crate) struct BlockWeights {
    /// (norm1, qkv, o, norm2, w1, w3, w2), in this order.
    pub w: [Tensor; 7],
    pub ids: [usize; 7],
}

/// Static shape and constants of the block.
#[derive(Clone)]
pub(crate) struct BlockDims {
    pub heads: usize,
    pub eps: f32,
    /// RoPE tables (t, e/2), f32.
    pub cos: Tensor,
    pub sin: Tensor,
}

/// What the forward keeps.
struct Saved {
    w: BlockWeights,
    dims: BlockDims,
    shape: (usize, usize, usize),
    x: Tensor,
    h1: Tensor,
    attn: Qkv,
    /// What the attention kernel keeps for its backward (P, or each row's log-sum-exp;
    /// `kernels::attn`), else the composed softmax's P.
    p: Tensor,
    y: Tensor,
    x2: Tensor,
    h2: Tensor,
    a: Tensor,
    b3: Tensor,
    s: Tensor,
}

/// What the attention's backward starts from: what the attention kernel returned for it
/// where one ran (the qkv projection's rows after the one-block kernel, roped as loaded;
/// after the tiled one, the heads the forward split them into), else q, k, v (b, h, t, e).
enum Qkv {
    Kernel(Tensor),
    Heads(Tensor, Tensor, Tensor),
}

/// x · wᵀ on rows: (rows, in) × (out, in)ᵀ.
fn lin(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    gemm::linear(x, w, None)
}

/// The block forward on x (b, t, d); returns the output and the saved state.
pub(crate) fn forward(
    x: &Tensor,
    w: BlockWeights,
    dims: BlockDims,
) -> Result<(Tensor, Box<dyn SavedStage>)> {
    let (b, t, d) = x.dims3()?;
    let (h, e) = (dims.heads, d / dims.heads);
    let [n1, wqkv, wo, n2, w1, w3, w2] = &w.w;
    let x = x.reshape((b * t, d))?;
    let h1 = rmsnorm::rms_norm_fused(&x, n1, dims.eps as f64)?;
    mark("fwd/block/attn/norm");
    let qkv = lin(&h1, wqkv)?;
    mark("fwd/block/attn/qkv_proj");
    let scale = 1.0 / (e as f64).sqrt();
    let tables = [&dims.cos, &dims.sin];
    // bf16 on CUDA: one kernel from the qkv rows (rope, scores, softmax, values, rows; tiled
    // at multiples of 64 tokens); otherwise q, k, v split and roped in one kernel, then composed.
    let (attn, p, y) = match kernels::attn::forward(&qkv, (b, t, h), tables, scale)? {
        Some((saved, p, y)) => {
            mark("fwd/block/attn/core");
            (Qkv::Kernel(saved), p, y)
        }
        None => {
            let qkv = kernels::qkv_rope(&qkv.reshape((b, t, 3 * d))?, h, &dims.cos, &dims.sin)?;
            let (q, k, v) = (qkv.get(0)?, qkv.get(1)?, qkv.get(2)?);
            mark("fwd/block/attn/rope");
            let sc = q.matmul(&k.t()?)?;
            mark("fwd/block/attn/scores");
            let p = kernels::causal_softmax(&sc, scale)?;
            mark("fwd/block/attn/softmax");
            let y = kernels::swap12(&p.matmul(&v)?)?.reshape((b * t, d))?;
            mark("fwd/block/attn/value");
            (Qkv::Heads(q, k, v), p, y)
        }
    };
    // The residual adds are the GEMMs' epilogue (β = 1) on CUDA.
    let x2 = gemm::linear(&y, wo, Some(&x))?;
    mark("fwd/block/attn/out_proj");
    let h2 = rmsnorm::rms_norm_fused(&x2, n2, dims.eps as f64)?;
    mark("fwd/block/ffn/norm");
    let (a, b3) = (lin(&h2, w1)?, lin(&h2, w3)?);
    mark("fwd/block/ffn/w1_w3");
    let s = kernels::silu_mul(&a, &b3)?;
    mark("fwd/block/ffn/swiglu");
    let out = gemm::linear(&s, w2, Some(&x2))?.reshape((b, t, d))?;
    mark("fwd/block/ffn/w2");
    let saved = Saved {
        w,
        dims,
        shape: (b, t, d),
        x,
        h1,
        attn,
        p,
        y,
        x2,
        h2,
        a,
        b3,
        s,
    };
    Ok((out, Box::new(saved)))
}

/// gᵀ · x: the weight gradient (out, in) of a linear layer from its output gradient g
/// (rows, out) and input x (rows, in), in the compute dtype: a bf16 GEMM's gradient stays
/// bf16 (AdamW and DDP read it as it is; casting it to f32 here would only be cast back
/// for bf16 communication).
fn dweight(g: &Tensor, x: &Tensor) -> Result<Tensor> {
    gemm::matmul(&g.t()?, x, None)
}

/// Parameter `id`'s weight gradient gᵀ · x: summed into the step's sums in the GEMM where
/// they take it (`None` returned), else as [`dweight`] computes it.
fn dweight_to(
    sums: &mut Option<&mut Accumulator>,
    id: usize,
    g: &Tensor,
    x: &Tensor,
) -> Result<Option<Tensor>> {
    if let Some(sums) = sums.as_deref_mut() {
        if let Some(t) = sums.target(id) {
            let sum = gemm::weight_grad_sum(g, x, t.sum.as_ref(), t.scale)?;
            sums.put(id, sum)?;
            return Ok(None);
        }
    }
    dweight(g, x).map(Some)
}

impl SavedStage for Saved {
    fn backward(
        self: Box<Self>,
        upstream: Option<&Tensor>,
    ) -> Result<(Tensor, Vec<(usize, Tensor)>)> {
        self.run(upstream, None)
    }

    fn backward_into(
        self: Box<Self>,
        upstream: Option<&Tensor>,
        sums: &mut Accumulator,
    ) -> Result<(Tensor, Vec<(usize, Tensor)>)> {
        self.run(upstream, Some(sums))
    }
}

impl Saved {
    /// The backward; with `sums`, the five weight gradients go into the step's sums.
    fn run(
        self: Box<Self>,
        upstream: Option<&Tensor>,
        mut sums: Option<&mut Accumulator>,
    ) -> Result<(Tensor, Vec<(usize, Tensor)>)> {
        let upstream = upstream.ok_or_else(|| {
            crate::error::ModelError::Config("a Transformer block cannot be the last stage".into())
        })?;
        let s = *self;
        let (b, t, d) = s.shape;
        let (h, e) = (s.dims.heads, d / s.dims.heads);
        let [n1, wqkv, wo, n2, w1, w3, w2] = &s.w.w;
        let id = s.w.ids;
        let g = upstream.to_dtype(s.x.dtype())?.reshape((b * t, d))?;
        // Feed-forward: out = x2 + w2(silu(w1 h2) ⊙ w3 h2), h2 = norm2(x2).
        let dw2 = dweight_to(&mut sums, id[6], &g, &s.s)?;
        let ds = gemm::matmul(&g, w2, None)?;
        mark("bwd/block/ffn/w2");
        let (da, db) = kernels::silu_mul_bwd(&s.a, &s.b3, &ds)?;
        mark("bwd/block/ffn/swiglu");
        let [dw1, dw3]: [Option<Tensor>; 2] = if sums.is_some() {
            [
                dweight_to(&mut sums, id[4], &da, &s.h2)?,
                dweight_to(&mut sums, id[5], &db, &s.h2)?,
            ]
        } else {
            let [a, b]: [Tensor; 2] = gemm::weight_grads(&[&da, &db], &s.h2)?
                .try_into()
                .expect("two gradients");
            [Some(a), Some(b)]
        };
        // da·w1 + db·w3: the second GEMM adds the first in its epilogue.
        let dh2 = gemm::matmul(&db, w3, Some(&gemm::matmul(&da, w1, None)?))?;
        mark("bwd/block/ffn/w1_w3");
        let (dx2, dn2) = rmsnorm::backward_add(&s.x2, n2, &dh2, s.dims.eps, &g)?;
        mark("bwd/block/ffn/norm");
        // Attention: x2 = x + wo(y), y = heads of softmax(q kᵀ/√e) v, q/k roped from norm1(x).
        let dwo = dweight_to(&mut sums, id[2], &dx2, &s.y)?;
        let dyr = gemm::matmul(&dx2, wo, None)?;
        mark("bwd/block/attn/out_proj");
        let scale = 1.0 / (e as f64).sqrt();
        let tables = [&s.dims.cos, &s.dims.sin];
        let dqkv = match &s.attn {
            Qkv::Kernel(saved) => {
                let g =
                    kernels::attn::backward(saved, (b, t, h), tables, &s.p, [&s.y, &dyr], scale)?;
                let g = g.ok_or_else(|| {
                    crate::error::ModelError::Config(
                        "the attention kernel ran forward but refused its backward".into(),
                    )
                })?;
                mark("bwd/block/attn/core");
                g
            }
            Qkv::Heads(q, k, v) => {
                let dy = kernels::swap12(&dyr.reshape((b, t, h, e))?)?;
                let dp = dy.matmul(&v.t()?)?;
                let dv = s.p.t()?.matmul(&dy)?;
                mark("bwd/block/attn/value");
                let dsc = kernels::causal_softmax_bwd(&s.p, &dp, scale)?;
                mark("bwd/block/attn/softmax");
                let (dqr, dkr) = (dsc.matmul(k)?, dsc.t()?.matmul(q)?);
                mark("bwd/block/attn/scores");
                // One kernel: q and k rotated back and all three laid out as the GEMM's rows.
                let dqkv = kernels::qkv_rope_bwd(&dqr, &dkr, &dv, &s.dims.cos, &s.dims.sin)?
                    .reshape((b * t, 3 * d))?;
                mark("bwd/block/attn/rope");
                dqkv
            }
        };
        let dwqkv = dweight_to(&mut sums, id[1], &dqkv, &s.h1)?;
        let dh1 = gemm::matmul(&dqkv, wqkv, None)?;
        mark("bwd/block/attn/qkv_proj");
        let (dx, dn1) = rmsnorm::backward_add(&s.x, n1, &dh1, s.dims.eps, &dx2)?;
        let dx = dx.reshape((b, t, d))?;
        mark("bwd/block/attn/norm");
        let grads = [Some(dn1), dwqkv, dwo, Some(dn2), dw1, dw3, dw2];
        let grads = id.into_iter().zip(grads);
        Ok((dx, grads.filter_map(|(i, g)| Some((i, g?))).collect()))
    }
}

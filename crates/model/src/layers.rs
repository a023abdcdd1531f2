//! The building blocks. The element-wise and row-wise ones (`rms_norm`, `rope`,
//! `causal_softmax`, `silu_mul`, `cross_entropy`) are differentiable compositions of plain
//! candle ops: the references the fused kernels of [`crate::kernels`] are tested against.
//! `attention` and `swiglu` use the fused kernels.

use crate::error::Result;
use crate::kernels;
use candle_core::{DType, Device, Tensor, D};

/// x @ wᵀ for x of shape (…, in) and w of shape (out, in), as nn.Linear without bias.
pub fn linear(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let dims = x.dims().to_vec();
    let (in_f, out_f) = (dims[dims.len() - 1], w.dim(0)?);
    let rows: usize = dims[..dims.len() - 1].iter().product();
    let y = x.reshape((rows, in_f))?.matmul(&w.t()?)?;
    let mut out_dims = dims;
    *out_dims.last_mut().expect("at least one dim") = out_f;
    Ok(y.reshape(out_dims)?)
}

/// x / √(mean(x²) + eps) · w, computed in f32 and cast back (as the anchor does).
pub fn rms_norm(x: &Tensor, w: &Tensor, eps: f64) -> Result<Tensor> {
    let dt = x.dtype();
    let xf = x.to_dtype(DType::F32)?;
    let r = (xf.sqr()?.mean_keepdim(D::Minus1)? + eps)?
        .sqrt()?
        .recip()?;
    Ok(xf.broadcast_mul(&r)?.to_dtype(dt)?.broadcast_mul(w)?)
}

/// LayerNorm over the last dim with weight and bias.
pub fn layer_norm(x: &Tensor, w: &Tensor, b: &Tensor, eps: f64) -> Result<Tensor> {
    let mu = x.mean_keepdim(D::Minus1)?;
    let xc = x.broadcast_sub(&mu)?;
    let var = xc.sqr()?.mean_keepdim(D::Minus1)?;
    let r = (var + eps)?.sqrt()?.recip()?;
    Ok(xc.broadcast_mul(&r)?.broadcast_mul(w)?.broadcast_add(b)?)
}

/// cos and sin tables of shape (t, head_dim/2) for RoPE with base `theta`.
pub fn rope_tables(
    t: usize,
    head_dim: usize,
    theta: f64,
    device: &Device,
) -> Result<(Tensor, Tensor)> {
    let half = head_dim / 2;
    let mut cos = Vec::with_capacity(t * half);
    let mut sin = Vec::with_capacity(t * half);
    for pos in 0..t {
        for i in 0..half {
            let inv = 1.0 / theta.powf((2 * i) as f64 / head_dim as f64);
            let a = pos as f64 * inv;
            cos.push(a.cos() as f32);
            sin.push(a.sin() as f32);
        }
    }
    Ok((
        Tensor::from_vec(cos, (t, half), device)?,
        Tensor::from_vec(sin, (t, half), device)?,
    ))
}

/// RoPE on interleaved pairs (`x[2i]`, `x[2i+1]`) of x: (b, h, t, d), as the anchor.
pub fn rope(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    let (b, h, t, d) = x.dims4()?;
    let pairs = x.reshape((b, h, t, d / 2, 2))?;
    let x1 = pairs.narrow(4, 0, 1)?.squeeze(4)?;
    let x2 = pairs.narrow(4, 1, 1)?.squeeze(4)?;
    let (cos, sin) = (cos.to_dtype(x.dtype())?, sin.to_dtype(x.dtype())?);
    let o1 = (x1.broadcast_mul(&cos)? - x2.broadcast_mul(&sin)?)?;
    let o2 = (x1.broadcast_mul(&sin)? + x2.broadcast_mul(&cos)?)?;
    Ok(Tensor::stack(&[o1, o2], 4)?.reshape((b, h, t, d))?)
}

/// Additive causal mask (tq, tk): 0 where key j <= query i + (tk − tq), -inf after.
pub fn causal_mask(tq: usize, tk: usize, device: &Device) -> Result<Tensor> {
    let m: Vec<f32> = (0..tq)
        .flat_map(|i| {
            (0..tk).map(move |j| {
                if j <= i + (tk - tq) {
                    0.0
                } else {
                    f32::NEG_INFINITY
                }
            })
        })
        .collect();
    Ok(Tensor::from_vec(m, (tq, tk), device)?)
}

/// softmax(scale·x + causal mask) over the last dim of scores (…, tq, tk).
pub fn causal_softmax(x: &Tensor, scale: f64) -> Result<Tensor> {
    let (tq, tk) = (x.dim(D::Minus2)?, x.dim(D::Minus1)?);
    let mask = causal_mask(tq, tk, x.device())?.to_dtype(x.dtype())?;
    Ok(candle_nn::ops::softmax(
        &(x * scale)?.broadcast_add(&mask)?,
        D::Minus1,
    )?)
}

/// silu(a) ⊙ b.
pub fn silu_mul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    Ok((candle_nn::ops::silu(a)? * b)?)
}

/// Mean cross-entropy of logits (N, V) against u32 targets (N,), in f32 (candle-nn's).
pub fn cross_entropy(logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
    Ok(candle_nn::loss::cross_entropy(
        &logits.to_dtype(DType::F32)?,
        targets,
    )?)
}

/// Causal multi-head attention with RoPE on q and k; x: (b, t, d); f32 tables (t, d/2).
pub fn attention(
    x: &Tensor,
    wqkv: &Tensor,
    wo: &Tensor,
    heads: usize,
    cos: &Tensor,
    sin: &Tensor,
) -> Result<Tensor> {
    let (b, t, d) = x.dims3()?;
    let hd = d / heads;
    let qkv = linear(x, wqkv)?
        .reshape((b, t, 3, heads, hd))?
        .permute((2, 0, 3, 1, 4))?;
    let q = kernels::rope(&qkv.get(0)?, cos, sin)?;
    let k = kernels::rope(&qkv.get(1)?, cos, sin)?;
    let v = qkv.get(2)?.contiguous()?;
    let att = q.matmul(&k.t()?.contiguous()?)?;
    let att = kernels::causal_softmax(&att, 1.0 / (hd as f64).sqrt())?;
    let y = att.matmul(&v)?.transpose(1, 2)?.reshape((b, t, d))?;
    linear(&y, wo)
}

/// SwiGLU feed-forward: w2(silu(w1 x) ⊙ w3 x).
pub fn swiglu(x: &Tensor, w1: &Tensor, w3: &Tensor, w2: &Tensor) -> Result<Tensor> {
    linear(&kernels::silu_mul(&linear(x, w1)?, &linear(x, w3)?)?, w2)
}

//! The building blocks, as differentiable compositions of candle ops (candle's fused
//! rms_norm/softmax/rope have no backward; fused kernels with backward come later and must
//! match these).

use crate::error::Result;
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

/// RoPE on interleaved pairs (x[2i], x[2i+1]) of x: (b, h, t, d), as the anchor.
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

/// Additive causal mask (t, t): 0 on and below the diagonal, -inf above.
pub fn causal_mask(t: usize, device: &Device) -> Result<Tensor> {
    let m: Vec<f32> = (0..t)
        .flat_map(|i| (0..t).map(move |j| if j <= i { 0.0 } else { f32::NEG_INFINITY }))
        .collect();
    Ok(Tensor::from_vec(m, (t, t), device)?)
}

/// Causal multi-head attention with RoPE on q and k; x: (b, t, d).
pub fn attention(
    x: &Tensor,
    wqkv: &Tensor,
    wo: &Tensor,
    heads: usize,
    cos: &Tensor,
    sin: &Tensor,
    mask: &Tensor,
) -> Result<Tensor> {
    let (b, t, d) = x.dims3()?;
    let hd = d / heads;
    let qkv = linear(x, wqkv)?
        .reshape((b, t, 3, heads, hd))?
        .permute((2, 0, 3, 1, 4))?;
    let q = rope(&qkv.get(0)?.contiguous()?, cos, sin)?;
    let k = rope(&qkv.get(1)?.contiguous()?, cos, sin)?;
    let v = qkv.get(2)?.contiguous()?;
    let att = (q.matmul(&k.t()?.contiguous()?)? / (hd as f64).sqrt())?;
    let att = att.broadcast_add(&mask.to_dtype(att.dtype())?)?;
    let att = candle_nn::ops::softmax(&att, D::Minus1)?;
    let y = att.matmul(&v)?.transpose(1, 2)?.reshape((b, t, d))?;
    linear(&y, wo)
}

/// SwiGLU feed-forward: w2(silu(w1 x) ⊙ w3 x).
pub fn swiglu(x: &Tensor, w1: &Tensor, w3: &Tensor, w2: &Tensor) -> Result<Tensor> {
    let g = candle_nn::ops::silu(&linear(x, w1)?)?;
    linear(&(g * linear(x, w3)?)?, w2)
}

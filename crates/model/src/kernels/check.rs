//! Every fused op against its composition of plain ops on one device and dtype: the same
//! seeded inputs through both, then `sum(y ⊙ r)` (r random) backward through both; the
//! largest value and gradient differences, relative to the composition's largest magnitude.

use crate::error::{ModelError, Result};
use crate::{kernels, layers, rmsnorm};
use candle_core::{DType, Device, Tensor, Var};
use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};

/// One op's comparison.
#[derive(Debug, Clone)]
pub struct Comparison {
    pub op: &'static str,
    /// max |fused − composed| / max |composed| over the output.
    pub value: f32,
    /// The same over every differentiable input's gradient (the worst one).
    pub grad: f32,
}

fn randn(shape: &[usize], seed: u64, dev: &Device, dtype: DType) -> Result<Tensor> {
    let mut r = rand::rngs::StdRng::seed_from_u64(seed);
    let n = shape.iter().product();
    let v: Vec<f32> = (0..n).map(|_| StandardNormal.sample(&mut r)).collect();
    Ok(Tensor::from_vec(v, shape, dev)?.to_dtype(dtype)?)
}

/// max |a − b| / max |b|, NaN when either side holds a NaN (a reduction that skips NaN
/// would let a broken kernel pass), computed on the host.
fn rel(a: &Tensor, b: &Tensor) -> Result<f32> {
    let host = |t: &Tensor| -> Result<Vec<f32>> {
        Ok(t.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?)
    };
    let (a, b) = (host(a)?, host(b)?);
    let worst = |m: f32, v: f32| {
        if m.is_nan() || v.is_nan() {
            f32::NAN
        } else {
            m.max(v)
        }
    };
    let scale = b.iter().map(|v| v.abs()).fold(0.0, worst).max(1e-12);
    let diff = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, worst);
    Ok(diff / scale)
}

type Op<'a> = &'a dyn Fn(&[Tensor]) -> Result<Tensor>;

/// Runs `fused` and `composed` on the same inputs (`vars` differentiable, `fixed` not).
fn compare(
    op: &'static str,
    vars: &[Var],
    fixed: &[Tensor],
    fused: Op,
    composed: Op,
    seed: u64,
) -> Result<Comparison> {
    let ins: Vec<Tensor> = vars
        .iter()
        .map(|v| v.as_tensor().clone())
        .chain(fixed.iter().cloned())
        .collect();
    let (yf, yc) = (fused(&ins)?, composed(&ins)?);
    if yf.dims() != yc.dims() {
        return Err(ModelError::Config(format!(
            "{op}: fused shape {:?} vs composed {:?}",
            yf.dims(),
            yc.dims()
        )));
    }
    let r = randn(yc.dims(), seed ^ 0x5eed, yc.device(), yc.dtype())?;
    let gf = (&yf * &r)?.sum_all()?.backward()?;
    let gc = (&yc * &r)?.sum_all()?.backward()?;
    let mut grad = 0f32;
    for v in vars {
        let missing = || ModelError::Config(format!("{op}: an input got no gradient"));
        let (a, b) = (
            gf.get(v.as_tensor()).ok_or_else(missing)?,
            gc.get(v.as_tensor()).ok_or_else(missing)?,
        );
        grad = grad.max(rel(a, b)?);
    }
    Ok(Comparison {
        op,
        value: rel(&yf, &yc)?,
        grad,
    })
}

/// Compares every fused op with its composition on `dev` in `dtype` (f32 or bf16).
pub fn compare_all(dev: &Device, dtype: DType) -> Result<Vec<Comparison>> {
    let var = |shape: &[usize], seed| -> Result<Var> {
        Ok(Var::from_tensor(&randn(shape, seed, dev, dtype)?)?)
    };
    let mut out = Vec::new();

    // 48 columns: 16-byte rows (one warp per row); 50: not, so the per-block kernels.
    for (op, cols) in [("rms_norm", 48usize), ("rms_norm 50 cols", 50)] {
        let (x, w) = (var(&[3, 5, cols], 1)?, var(&[cols], 2)?);
        out.push(compare(
            op,
            &[x, w],
            &[],
            &|t| rmsnorm::rms_norm_fused(&t[0], &t[1], 1e-5),
            &|t| layers::rms_norm(&t[0], &t[1], 1e-5),
            3,
        )?);
    }
    // 4,100 rows: several rows per warp in the one-kernel backward and a last block short of
    // rows. On CUDA in bf16, 4,104 columns: the wide kernel (more than 3,072), whose last
    // 16-byte chunk only thread 0 holds, and 701 rows, two a block but the last.
    if dev.is_cuda() || dtype == DType::F32 {
        out.push(norm_backward_add(
            "rms_norm backward_add",
            (4100, 64),
            dev,
            dtype,
        )?);
    }
    if dev.is_cuda() && dtype == DType::BF16 {
        let op = "rms_norm backward_add 4104 cols";
        out.push(norm_backward_add(op, (701, 4104), dev, dtype)?);
    }

    let (cos, sin) = layers::rope_tables(6, 16, 10_000.0, dev)?;
    let x = var(&[2, 3, 6, 16], 4)?;
    out.push(compare(
        "rope",
        &[x],
        &[cos, sin],
        &|t| kernels::rope(&t[0], &t[1], &t[2]),
        &|t| layers::rope(&t[0], &t[1], &t[2]),
        5,
    )?);

    // q, k, v out of the qkv projection's rows (b 2, t 6, 3 heads of width 16).
    let (cos, sin) = layers::rope_tables(6, 16, 10_000.0, dev)?;
    let qkv = var(&[2, 6, 3 * 3 * 16], 13)?;
    out.push(compare(
        "qkv_rope",
        &[qkv],
        &[cos, sin],
        &|t| kernels::qkv_rope(&t[0], 3, &t[1], &t[2]),
        &|t| kernels::qkv_rope_composed(&t[0], 3, &t[1], &t[2]),
        14,
    )?);

    // Square scores (as in the LM) and tq < tk (queries at the end of a longer key range).
    for (op, shape) in [
        ("causal_softmax", [2usize, 3, 37, 37]),
        ("causal_softmax tq<tk", [2, 3, 5, 9]),
        // tk a multiple of 4: the kernels holding 4 entries per lane (one chunk, and two
        // with the second partial). Longer rows (260) put the bf16 composition's own
        // roundings past the bf16 bound (5.4e-2 in run 25), so the rows stay short.
        ("causal_softmax 4-wide", [2, 3, 36, 36]),
        ("causal_softmax 4-wide tq<tk", [1, 2, 20, 132]),
    ] {
        let x = var(&shape, 6)?;
        out.push(compare(
            op,
            &[x],
            &[],
            &|t| kernels::causal_softmax(&t[0], 0.35),
            &|t| layers::causal_softmax(&t[0], 0.35),
            7,
        )?);
    }

    if dev.is_cuda() && dtype == DType::BF16 {
        // The LM's shapes (t 128; e 64, 80 for 2.7B, 128 for 6.7B and 13B), e past a shorter
        // t, the widest e: the tiled kernel at t 64 and 128 since session 58, the one-block
        // kernel at t 32 and 96 (and at 64 and 128 under MODEL_ATTN_TILED=0).
        for (op, shape) in [
            ("attention", [2usize, 3, 128, 64]),
            ("attention t96 e64", [2, 3, 96, 64]),
            ("attention e80", [1, 2, 128, 80]),
            ("attention t64 e80", [2, 2, 64, 80]),
            ("attention t32 e128", [1, 2, 32, 128]),
            ("attention e128", [1, 2, 128, 128]),
            // The tiled kernel above 128 tokens: three tiles (a query tile a
            // block), several query tiles per key tile, the widest e and an odd count of
            // 16-column tiles; two query tiles a block where t / 64 is even, at the widest e.
            ("attention tiled t192 e128", [1, 2, 192, 128]),
            ("attention tiled t256 e64", [2, 3, 256, 64]),
            ("attention tiled t512 e80", [1, 2, 512, 80]),
            ("attention tiled t384 e128", [1, 3, 384, 128]),
            // Many blocks at once (2 · 8 heads · 16 tiles a launch) and 136 tile pairs a
            // head, whose dSᵀ the ∂q launch reads back.
            ("attention tiled t1024 e64", [2, 8, 1024, 64]),
        ] {
            out.push(attention(op, shape, dev)?);
        }
    }

    // 9,000 tokens: three of the backward's 4,096-token chunks; one id in two tokens of
    // three (more than a chunk's worth of one row), a hundred ids in the rest, two hundred in
    // none. The composition gathers f32 rows, then rounds them.
    let table = Var::from_tensor(&randn(&[300, 40], 15, dev, DType::F32)?)?;
    let ids: Vec<u32> = (0..9000u32)
        .map(|i| if i % 3 == 0 { i * 7 % 300 } else { 17 })
        .collect();
    let ids = Tensor::from_vec(ids, 9000, dev)?;
    out.push(compare(
        "embedding 9000 tokens",
        &[table],
        &[ids],
        &|t| kernels::embedding(&t[0], &t[1], dtype),
        &|t| Ok(t[0].index_select(&t[1], 0)?.to_dtype(dtype)?),
        16,
    )?);

    let (a, b) = (var(&[4, 3, 70], 8)?, var(&[4, 3, 70], 9)?);
    out.push(compare(
        "silu_mul",
        &[a, b],
        &[],
        &|t| kernels::silu_mul(&t[0], &t[1]),
        &|t| layers::silu_mul(&t[0], &t[1]),
        10,
    )?);

    let logits = Var::from_tensor(&(randn(&[12, 300], 11, dev, DType::F32)? * 3.0)?)?;
    let targets: Vec<u32> = (0..12).map(|i| (i * 97 % 300) as u32).collect();
    let targets = Tensor::from_vec(targets, 12, dev)?;
    out.push(compare(
        "cross_entropy",
        &[logits],
        &[targets],
        &|t| kernels::cross_entropy(&t[0], &t[1]),
        &|t| layers::cross_entropy(&t[0], &t[1]),
        12,
    )?);
    Ok(out)
}

/// The backward with the residual's gradient added, as the blocks call it, on (rows, cols).
/// value: ∂x + res against the f32 composition's autograd ∂x plus res; grad: ∂w. (CUDA, or
/// f32.)
fn norm_backward_add(
    op: &'static str,
    (rows, cols): (usize, usize),
    dev: &Device,
    dtype: DType,
) -> Result<Comparison> {
    let (x, w) = (
        randn(&[rows, cols], 21, dev, dtype)?,
        randn(&[cols], 22, dev, dtype)?,
    );
    let (g, res) = (
        randn(&[rows, cols], 23, dev, dtype)?,
        randn(&[rows, cols], 24, dev, dtype)?,
    );
    let (dx, dw) = rmsnorm::backward_add(&x, &w, &g, 1e-5, &res)?;
    let f32v = |t: &Tensor| -> Result<Var> { Ok(Var::from_tensor(&t.to_dtype(DType::F32)?)?) };
    let (xv, wv) = (f32v(&x)?, f32v(&w)?);
    let y = layers::rms_norm(xv.as_tensor(), wv.as_tensor(), 1e-5)?;
    let grads = (&y * &g.to_dtype(DType::F32)?)?.sum_all()?.backward()?;
    let missing = || ModelError::Config("rms_norm backward_add: no gradient".into());
    let cx = (grads.get(xv.as_tensor()).ok_or_else(missing)? + res.to_dtype(DType::F32)?)?;
    let cw = grads.get(wv.as_tensor()).ok_or_else(missing)?;
    Ok(Comparison {
        op,
        value: rel(&dx, &cx)?,
        grad: rel(&dw, cw)?,
    })
}

/// The one-kernel attention (bf16, CUDA), from the qkv rows with RoPE, against the f32
/// composition (split, rope, scores, softmax, values): value, the worst of P (where the
/// one-block kernel keeps it: 32 and 96 tokens) and the output rows; grad, ∂qkv from a random gradient
/// of the rows. An error where two runs of the backward differ in a bit.
fn attention(op: &'static str, [b, h, t, e]: [usize; 4], dev: &Device) -> Result<Comparison> {
    let scale = 1.0 / (e as f64).sqrt();
    let rows = randn(&[b * t, 3 * h * e], 31, dev, DType::BF16)?;
    let dy = randn(&[b * t, h * e], 34, dev, DType::BF16)?;
    let (cos, sin) = layers::rope_tables(t, e, 10_000.0, dev)?;
    let fail = |what: &str| ModelError::Config(format!("{op}: the kernel did not apply ({what})"));
    let (saved, kept, y) = super::attn::forward(&rows, (b, t, h), [&cos, &sin], scale)?
        .ok_or_else(|| fail("forward"))?;
    let backward = || {
        super::attn::backward(&saved, (b, t, h), [&cos, &sin], &kept, [&y, &dy], scale)?
            .ok_or_else(|| fail("backward"))
    };
    let dqkv = backward()?;
    // A second run repeats the first's bits (no atomics: a replayed step repeats its own).
    let f = |t: &Tensor| t.to_dtype(DType::F32);
    let differ = (f(&dqkv)? - f(&backward()?)?)?
        .abs()?
        .max_all()?
        .to_scalar::<f32>()?;
    if differ != 0.0 {
        return Err(ModelError::Config(format!(
            "{op}: two runs of the backward differ, by up to {differ:e}"
        )));
    }
    let rv = Var::from_tensor(&rows.to_dtype(DType::F32)?)?;
    let heads = rv
        .as_tensor()
        .reshape((b, t, 3, h, e))?
        .permute((2, 0, 3, 1, 4))?;
    let part = |i: usize| -> Result<Tensor> { Ok(heads.get(i)?.contiguous()?) };
    let (q, k) = (
        layers::rope(&part(0)?, &cos, &sin)?,
        layers::rope(&part(1)?, &cos, &sin)?,
    );
    let cp = layers::causal_softmax(&q.matmul(&k.t()?)?, scale)?;
    let cy = cp
        .matmul(&part(2)?)?
        .transpose(1, 2)?
        .reshape((b * t, h * e))?;
    let grads = (&cy * &dy.to_dtype(DType::F32)?)?.sum_all()?.backward()?;
    let cg = grads
        .get(rv.as_tensor())
        .ok_or_else(|| ModelError::Config(format!("{op}: no gradient")))?;
    Ok(Comparison {
        op,
        value: match kept.dims() == cp.dims() {
            true => rel(&kept, &cp)?.max(rel(&y, &cy)?),
            false => rel(&y, &cy)?,
        },
        grad: rel(&dqkv, cg)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nan_on_either_side_makes_the_error_nan() {
        let dev = Device::Cpu;
        let b = Tensor::new(&[1.0f32, -2.0, 4.0], &dev).unwrap();
        let a = Tensor::new(&[1.0f32, -2.0, 3.0], &dev).unwrap();
        assert_eq!(rel(&a, &b).unwrap(), 0.25);
        let nan = Tensor::new(&[1.0f32, f32::NAN, 4.0], &dev).unwrap();
        assert!(rel(&nan, &b).unwrap().is_nan());
        assert!(rel(&b, &nan).unwrap().is_nan());
    }
}

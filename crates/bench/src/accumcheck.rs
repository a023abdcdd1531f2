//! `seam::accum::Accumulator` on the GPU against the same sums on the host: four
//! micro-batches of f32 and bf16 gradients from 7 to 2^21 + 3 elements (the small ones summed
//! many to a launch, the large ones one kernel each), the first two summed into new
//! buffers, the last averaging; and some parameters summed in place in the weight-gradient
//! GEMM as the block does (`model::gemm::weight_grad_sum`); and the last micro-batch's sums
//! sent in bf16 in one pass (`sum_new_as`) against the sum then the cast. The sums round as
//! the host's do, so apart from the GEMMs the bits must match.

use anyhow::{bail, Result};
use candle_core::{DType, Device, Tensor};
use seam::accum::Accumulator;

const SIZES: [usize; 6] = [7, 1600, 4099, 70_000, 1 << 20, (1 << 21) + 3];
const MICRO: usize = 4;

/// Micro-batch `m`'s gradients: f32 and bf16 of each size.
fn grads(m: usize, dev: &Device) -> Result<Vec<Option<Tensor>>> {
    let mut v = Vec::new();
    for (i, &n) in SIZES.iter().enumerate() {
        for dt in [DType::F32, DType::BF16] {
            let seed = (m * 100 + i) as f64;
            let t = Tensor::arange(0f32, n as f32, &Device::Cpu)?;
            let t = (t.affine(0.37, seed)?.sin()? * (1.0 + seed / 7.0))?.to_dtype(dt)?;
            v.push(Some(t.to_device(dev)?));
        }
    }
    Ok(v)
}

fn sums(dev: &Device) -> Result<Vec<Vec<f32>>> {
    let mut acc = Accumulator::default();
    for m in 0..MICRO {
        let scale = (m + 1 == MICRO).then_some(1.0 / MICRO as f64);
        acc.add(grads(m, dev)?, scale)?;
    }
    acc.take()?
        .into_iter()
        .map(|t| Ok(t.expect("a sum").flatten_all()?.to_vec1::<f32>()?))
        .collect()
}

/// One line: the sums' bits equal the host's, and a GEMM-summed weight gradient agrees.
pub fn run(gpu: &Device) -> Result<String> {
    let (got, want) = (sums(gpu)?, sums(&Device::Cpu)?);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        if g.len() != w.len() || g.iter().zip(w).any(|(a, b)| a.to_bits() != b.to_bits()) {
            bail!(
                "accumulate: sum {i} ({} elements) differs from the host's",
                w.len()
            );
        }
    }
    // DDP's last micro-batch into its bf16 wire (seam::accum::sum_new_as): the bits of the
    // sum in place, then candle's cast, on the GPU.
    let mut acc = Accumulator::default();
    acc.add(grads(1, gpu)?, None)?;
    acc.add(grads(2, gpu)?, None)?;
    for (i, (sum, g)) in acc.take()?.into_iter().zip(grads(3, gpu)?).enumerate() {
        let (sum, g) = (sum.expect("a sum"), g.expect("a gradient"));
        let fused = seam::accum::sum_new_as(&sum, &g, Some(0.25), DType::BF16)?;
        let own = sum.affine(1.0, 0.0)?;
        seam::accum::accumulate(&own, &g, Some(0.25))?;
        let cast = own.to_dtype(DType::BF16)?;
        // bf16 → f32 is exact: equal f32 bits are equal bf16 bits.
        let bits = |t: &Tensor| -> Result<Vec<u32>> {
            let v = t.flatten_all()?.to_dtype(DType::F32)?.to_vec1::<f32>()?;
            Ok(v.iter().map(|x| x.to_bits()).collect())
        };
        if bits(&fused)? != bits(&cast)? {
            bail!("accumulate: sum {i} into bf16 in one pass differs from the sum then the cast");
        }
    }
    // Parameter 0 summed in its GEMM through a lent accumulator, parameter 1 returned.
    let (x, g) = (
        Tensor::randn(0f32, 1., (256, 96), gpu)?.to_dtype(DType::BF16)?,
        Tensor::randn(0f32, 1., (256, 64), gpu)?.to_dtype(DType::BF16)?,
    );
    let mut acc = Accumulator::default();
    for m in 0..MICRO {
        let scale = (m + 1 == MICRO).then_some(1.0 / MICRO as f64);
        acc.lend(scale);
        let t = acc.target(0).expect("a lent sum");
        let s = model::gemm::weight_grad_sum(&g, &x, t.sum.as_ref(), t.scale)?;
        acc.put(0, s)?;
        acc.add(vec![None, Some(g.t()?.matmul(&x)?)], scale)?;
    }
    let s = acc.take()?;
    let f = |t: &Option<Tensor>| t.as_ref().expect("a sum").to_dtype(DType::F32);
    let want = g
        .to_dtype(DType::F32)?
        .t()?
        .matmul(&x.to_dtype(DType::F32)?)?;
    for (what, t) in [("in the GEMM", f(&s[0])?), ("returned", f(&s[1])?)] {
        let err = ((t - &want)?.abs()?.max_all()?.to_scalar::<f32>()?)
            / want.abs()?.max_all()?.to_scalar::<f32>()?;
        if err.is_nan() || err > 1e-2 {
            bail!("accumulate: a bf16 weight gradient summed {what}, 4 micro-batches: relative error {err:.2e}");
        }
    }
    Ok(format!(
        "model-check seam::accum on the GPU vs the host: {} sums of 4 micro-batches (f32, bf16; 7 to 2^21+3 elements), bit-identical; the same into bf16 in one pass as the sum then the cast; a weight gradient summed in its GEMM and one returned agree: OK",
        got.len()
    ))
}

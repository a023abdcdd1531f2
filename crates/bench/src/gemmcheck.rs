//! `model::gemm` on the GPU against candle's f32 matmul (+ add): every operand layout the
//! block passes (plain and transposed views), with and without the epilogue add, in f32,
//! bf16 and f32 on TF32 (where weight gradients take transposed copies), on shapes that are
//! no multiple of a tile; and `kernels::transpose` bit-identical to candle's copy.

use anyhow::{bail, Result};
use candle_core::{DType, Device, Tensor};

/// Worst relative error allowed: f32 is f32 arithmetic in another order; TF32 keeps 10
/// mantissa bits, bf16 rounds inputs and output to 8.
fn tolerance(dtype: DType, tf32: bool) -> f32 {
    match (dtype, tf32) {
        (DType::BF16, _) => 1e-2,
        (_, true) => 5e-3,
        _ => 1e-5,
    }
}

fn operand(
    rows: usize,
    cols: usize,
    transposed: bool,
    dtype: DType,
    dev: &Device,
) -> Result<Tensor> {
    Ok(if transposed {
        Tensor::randn(0f32, 1., (cols, rows), dev)?
            .to_dtype(dtype)?
            .t()?
    } else {
        Tensor::randn(0f32, 1., (rows, cols), dev)?.to_dtype(dtype)?
    })
}

/// One line per (dtype, TF32) with the cases checked and the worst relative error.
pub fn run(gpu: &Device) -> Result<Vec<String>> {
    let mut lines = Vec::new();
    for (dtype, tf32) in [
        (DType::F32, false),
        (DType::BF16, false),
        (DType::F32, true),
    ] {
        let was = model::tf32::tf32();
        model::tf32::set_tf32(tf32);
        let (mut worst, mut cases) = (0f32, 0);
        for (m, k, n) in [(37, 70, 50), (256, 320, 128), (1, 64, 33)] {
            for (ta, tb, add) in (0..8).map(|i| (i & 1 == 1, i & 2 == 2, i & 4 == 4)) {
                let a = operand(m, k, ta, dtype, gpu)?;
                let b = operand(k, n, tb, dtype, gpu)?;
                let c = add
                    .then(|| Tensor::randn(0f32, 1., (m, n), gpu)?.to_dtype(dtype))
                    .transpose()?;
                let got = model::gemm::matmul(&a, &b, c.as_ref())?.to_dtype(DType::F32)?;
                let f = |t: &Tensor| t.to_dtype(DType::F32);
                model::tf32::set_tf32(false);
                let mut want = f(&a)?.matmul(&f(&b)?)?;
                if let Some(c) = &c {
                    want = (want + f(c)?)?;
                }
                model::tf32::set_tf32(tf32);
                let scale = want.abs()?.max_all()?.to_scalar::<f32>()?.max(1e-30);
                let err = (got - &want)?.abs()?.max_all()?.to_scalar::<f32>()? / scale;
                if err.is_nan() || err > tolerance(dtype, tf32) {
                    bail!("gemm {m}x{k}x{n} {dtype:?} tf32 {tf32}, a transposed {ta}, b transposed {tb}, add {add}: relative error {err:.2e} over {:.0e}", tolerance(dtype, tf32));
                }
                worst = worst.max(err);
                cases += 1;
            }
        }
        // Weight gradients of two layers sharing their input (the TF32 path's one copy).
        let x = operand(96, 40, false, dtype, gpu)?;
        let gs = [
            operand(96, 24, false, dtype, gpu)?,
            operand(96, 56, false, dtype, gpu)?,
        ];
        let got = model::gemm::weight_grads(&[&gs[0], &gs[1]], &x)?;
        for (g, got) in gs.iter().zip(got) {
            let f = |t: &Tensor| t.to_dtype(DType::F32);
            model::tf32::set_tf32(false);
            let want = f(&g.t()?)?.matmul(&f(&x)?)?;
            model::tf32::set_tf32(tf32);
            let scale = want.abs()?.max_all()?.to_scalar::<f32>()?.max(1e-30);
            let err = (f(&got)? - &want)?.abs()?.max_all()?.to_scalar::<f32>()? / scale;
            if err.is_nan() || err > tolerance(dtype, tf32) {
                bail!("gemm::weight_grads {dtype:?} tf32 {tf32}: relative error {err:.2e}");
            }
            worst = worst.max(err);
            cases += 1;
        }
        model::tf32::set_tf32(was);
        lines.push(format!(
            "model-check gemm (cuBLASLt, tuned) {dtype:?}{} vs candle matmul + add in f32: {cases} cases, worst relative error {worst:.2e}: OK",
            if tf32 { " on TF32" } else { "" }
        ));
    }
    lines.push(sums(gpu)?);
    for dtype in [DType::F32, DType::BF16] {
        let x = Tensor::randn(0f32, 1., (67, 45), gpu)?.to_dtype(dtype)?;
        let a = model::kernels::transpose(&x)?
            .to_dtype(DType::F32)?
            .flatten_all()?
            .to_vec1::<f32>()?;
        let b = x
            .t()?
            .contiguous()?
            .to_dtype(DType::F32)?
            .flatten_all()?
            .to_vec1::<f32>()?;
        if a.iter().zip(&b).any(|(p, q)| p.to_bits() != q.to_bits()) || a.len() != b.len() {
            bail!("kernels::transpose {dtype:?} (67, 45) differs from candle's t().contiguous()");
        }
    }
    lines.push(
        "model-check kernels::transpose f32, bf16 (67 x 45) vs candle's copy: bit-identical: OK"
            .into(),
    );
    Ok(lines)
}

/// `gemm::weight_grad_sum`, as accumulation runs it: a first micro-batch's f32 weight
/// gradient into a new buffer, a second one summed into it in place and averaged (β = α =
/// ½; the shape's first call, so its algorithm is timed then, on a copy of the sum), against
/// candle's f32 matmuls.
fn sums(gpu: &Device) -> Result<String> {
    let mut worst = 0f32;
    for dtype in [DType::F32, DType::BF16] {
        for (rows, out, inp) in [(96, 24, 40), (1024, 384, 128)] {
            let x = operand(rows, inp, false, dtype, gpu)?;
            let g1 = operand(rows, out, false, dtype, gpu)?;
            let g2 = operand(rows, out, false, dtype, gpu)?;
            let first = model::gemm::weight_grad_sum(&g1, &x, None, 1.0)?;
            let sum = model::gemm::weight_grad_sum(&g2, &x, Some(&first), 0.5)?;
            let f = |t: &Tensor| t.to_dtype(DType::F32);
            let was = model::tf32::tf32();
            model::tf32::set_tf32(false);
            let want = ((f(&g1.t()?)?.matmul(&f(&x)?)? + f(&g2.t()?)?.matmul(&f(&x)?)?)? * 0.5)?;
            model::tf32::set_tf32(was);
            let scale = want.abs()?.max_all()?.to_scalar::<f32>()?.max(1e-30);
            for (what, t) in [("returned", &sum), ("first buffer", &first)] {
                if t.dtype() != DType::F32 {
                    bail!(
                        "gemm::weight_grad_sum {dtype:?}: the {what} sum is {:?}, not f32",
                        t.dtype()
                    );
                }
                let err = (t - &want)?.abs()?.max_all()?.to_scalar::<f32>()? / scale;
                if err.is_nan() || err > tolerance(dtype, false) {
                    bail!("gemm::weight_grad_sum {dtype:?} {rows}x{out}x{inp}, the {what}: relative error {err:.2e} (summed in place?)");
                }
                worst = worst.max(err);
            }
        }
    }
    Ok(format!(
        "model-check gemm::weight_grad_sum f32, bf16 (new f32 sum, then in place at β = α = 1/2) vs candle f32: 4 cases, worst relative error {worst:.2e}: OK"
    ))
}

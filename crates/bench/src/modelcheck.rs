//! GPU against CPU on a tiny LM: same seed, same batch; the loss and every gradient must
//! agree within the dtype's tolerance (fp32: cuBLAS vs CPU summation order; bf16: 8-bit
//! mantissa). Not through step::TrainStep: it compares the gradients, which a step consumes
//! (graphcheck.rs checks the step itself, captured against eager).

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor, Var};
use model::{forward_backward, AdamW, AdamWConfig, Batch, LmConfig, StagedModel, TransformerLm};

fn build(dev: &Device, dtype: DType) -> Result<(TransformerLm, Batch)> {
    let mut lm = TransformerLm::new(LmConfig::tiny(512), 42, dev)?;
    lm.set_compute_dtype(dtype);
    let ids: Vec<u32> = (0..4 * 32).map(|i| (i * 37 % 512) as u32).collect();
    let tg: Vec<u32> = (0..4 * 32).map(|i| (i * 91 % 512) as u32).collect();
    let b = Batch::new(lm.tokens(&ids, 4, dev)?, lm.tokens(&tg, 4, dev)?);
    Ok((lm, b))
}

/// Returns (dtype, |loss diff|, worst relative gradient error) per dtype; fails past tolerance.
pub fn run(gpu: &Device) -> Result<Vec<(DType, f32, f32)>> {
    let mut out = Vec::new();
    // The CPU reference is f32 for both comparisons: computed once.
    let (cpu_lm, cpu_b) = build(&Device::Cpu, DType::F32)?;
    let (lc, gc) = forward_backward(&cpu_lm, &cpu_b, |_, _| Ok(()))?;
    let lc = lc.to_scalar::<f32>()?;
    for (dtype, tol) in [(DType::F32, 1e-4f32), (DType::BF16, 5e-2)] {
        let (gpu_lm, gpu_b) = build(gpu, dtype)?;
        let (lg, gg) = forward_backward(&gpu_lm, &gpu_b, |_, _| Ok(()))?;
        let lg = lg.to_scalar::<f32>()?;
        let mut worst = 0f32;
        for (i, (a, b)) in gc.iter().zip(&gg).enumerate() {
            let (Some(a), Some(b)) = (a, b) else {
                bail!("parameter {i} has no gradient")
            };
            let b = b.to_device(&Device::Cpu)?.to_dtype(DType::F32)?;
            let scale = a
                .abs()?
                .flatten_all()?
                .max(0)?
                .to_scalar::<f32>()?
                .max(1e-6);
            let err = (a - &b)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()? / scale;
            if err > worst {
                worst = err;
            }
            if err > tol {
                bail!("{dtype:?}: gradient of {} differs by {err:.2e} (relative to its max) > {tol:.0e}", cpu_lm.params().names()[i]);
            }
        }
        let dl = (lc - lg).abs();
        if dl > tol * lc.abs() {
            bail!("{dtype:?}: loss CPU {lc} GPU {lg}");
        }
        out.push((dtype, dl, worst));
    }
    Ok(out)
}

/// The fused AdamW kernel against the candle-op AdamW, both on the GPU, three steps with
/// the same gradients of a model computing in `dtype` (a bf16 model's block gradients are
/// bf16, which the fused kernel reads as they are): returns the largest parameter
/// difference; fails above 2e-6.
pub fn fused_adamw(gpu: &Device, dtype: DType) -> Result<f32> {
    let (a, b) = (build(gpu, dtype)?, build(gpu, dtype)?);
    if dtype == DType::BF16 && !has_bf16_grad(&a.0, &a.1)? {
        bail!("fused AdamW check: a bf16 model gave no bf16 gradient to test the kernel with");
    }
    let cfg = AdamWConfig {
        lr: 1e-2,
        weight_decay: 0.1,
        ..AdamWConfig::default()
    };
    let (mut fused, mut plain) = (AdamW::new(cfg)?, AdamW::new(cfg)?);
    plain.fused = false;
    for _ in 0..3 {
        let (_, grads) = forward_backward(&a.0, &a.1, |_, _| Ok(()))?;
        fused.step(a.0.params().vars(), &grads)?;
        plain.step(b.0.params().vars(), &grads)?;
    }
    let mut worst = 0f32;
    for (x, y) in a.0.params().vars().iter().zip(b.0.params().vars()) {
        let d = (x.as_tensor() - y.as_tensor())?
            .abs()?
            .flatten_all()?
            .max(0)?
            .to_scalar::<f32>()?;
        worst = worst.max(d);
    }
    if worst > 2e-6 {
        bail!("fused AdamW differs from the candle-op AdamW by {worst:.2e}");
    }
    Ok(worst)
}

/// Every variant of the fused AdamW kernel against the candle-op AdamW on the GPU: f32 and
/// bf16 gradients, as whole tensors and as views at element offsets 1 and 4 of a larger
/// buffer (16-byte loads only at offsets that are multiples of 4), on 4096 and 1003
/// elements (1003: a tail of 3 after the four-at-a-time loop); three steps each. Returns
/// the largest parameter difference; fails above 2e-6.
pub fn fused_adamw_layouts(gpu: &Device) -> Result<f32> {
    let cfg = AdamWConfig {
        lr: 1e-2,
        weight_decay: 0.1,
        ..AdamWConfig::default()
    };
    let mut worst = 0f32;
    for n in [4096usize, 1003] {
        for offset in [0usize, 1, 4] {
            for dtype in [DType::F32, DType::BF16] {
                let init = Tensor::randn(0f32, 1.0, n, gpu)?;
                let (p, q) = (Var::from_tensor(&init)?, Var::from_tensor(&init)?);
                let (mut fused, mut plain) = (AdamW::new(cfg)?, AdamW::new(cfg)?);
                plain.fused = false;
                for _ in 0..3 {
                    let buf = Tensor::randn(0f32, 1.0, n + offset, gpu)?.to_dtype(dtype)?;
                    let g = vec![Some(buf.narrow(0, offset, n)?)];
                    fused.step(std::slice::from_ref(&p), &g)?;
                    plain.step(std::slice::from_ref(&q), &g)?;
                }
                let d = (p.as_tensor() - q.as_tensor())?
                    .abs()?
                    .max(0)?
                    .to_scalar::<f32>()?;
                if d > 2e-6 {
                    bail!("fused AdamW, {n} elements, {dtype:?} gradient at offset {offset}: differs from the candle-op AdamW by {d:.2e}");
                }
                worst = worst.max(d);
            }
        }
    }
    Ok(worst)
}

/// `model::kernels::to_bf16` (the four-at-a-time cast kernel, and candle's cast where it
/// falls back) against candle's f32 → bf16 cast: bit-identical on 4096 and 1003 elements
/// (a tail of 3), whole and as a view at offset 1 (the fallback). Returns the cases checked.
pub fn cast_bf16(gpu: &Device) -> Result<usize> {
    let mut cases = 0;
    for n in [4096usize, 1003] {
        let buf = (Tensor::randn(0f32, 1.0, n + 1, gpu)? * 1e3)?;
        for (what, t) in [
            ("whole", buf.narrow(0, 0, n)?.copy()?),
            ("view at 1", buf.narrow(0, 1, n)?),
        ] {
            let a = model::kernels::to_bf16(&t)?
                .to_dtype(DType::F32)?
                .to_vec1::<f32>()?;
            let b = t
                .to_dtype(DType::BF16)?
                .to_dtype(DType::F32)?
                .to_vec1::<f32>()?;
            if let Some(i) = (0..n).find(|&i| a[i].to_bits() != b[i].to_bits()) {
                bail!("to_bf16, {n} elements ({what}): element {i} is {} where candle's cast gives {}", a[i], b[i]);
            }
            cases += 1;
        }
    }
    Ok(cases)
}

/// The clipping norm's kernel (`seam::clip` on CUDA: GN_UNROLL loads per thread, 128
/// tensors a launch), in both its layouts, against the host path (f32 per tensor, f64 over
/// tensors): 170 gradients (two launches) of 7 to 2^20 + 5 elements, f32, bf16 and the two
/// mixed, whole and as views at offsets 1 and 4 (unaligned: summed element by element); the
/// coefficient at clip 0.5. Then an infinite gradient: the
/// coefficient is NaN and the fused AdamW leaves the parameter as it was (a skipped step).
/// Returns the worst relative norm error; fails above 1e-5.
pub fn grad_norm(gpu: &Device) -> Result<f64> {
    use seam::clip::{norm_and_coef_in, Layout};
    let sizes = [7usize, 1003, 4096, (1 << 20) + 5];
    let mut worst = 0f64;
    for dtype in [Some(DType::F32), Some(DType::BF16), None] {
        for offset in [0usize, 1, 4] {
            let mut on_gpu = Vec::new();
            for k in 0..170 {
                let n = sizes[k % sizes.len()];
                // None: f32 and bf16 in turn, every 3rd.
                let dt = dtype.unwrap_or(if k % 3 == 0 { DType::F32 } else { DType::BF16 });
                let buf = Tensor::randn(0f32, 1.0, n + offset, gpu)?.to_dtype(dt)?;
                on_gpu.push(Some(buf.narrow(0, offset, n)?));
            }
            let on_cpu: Vec<Option<Tensor>> = on_gpu
                .iter()
                .map(|g| g.as_ref().map(|g| g.to_device(&Device::Cpu)).transpose())
                .collect::<candle_core::Result<_>>()?;
            let b = seam::clip::norm_and_coef(&on_cpu, 0.5)?.to_vec1::<f32>()?;
            for layout in [Layout::Flat, Layout::Tensorwise] {
                let a = norm_and_coef_in(Some(layout), &on_gpu, 0.5)?.to_vec1::<f32>()?;
                let d = ((a[0] - b[0]).abs() / b[0]) as f64;
                let dc = ((a[1] - b[1]).abs() / b[1]) as f64;
                if d.max(dc) > 1e-5 {
                    bail!("gradient norm kernel ({layout:?}), {dtype:?} (None: mixed) at offset {offset}: [norm, coef] {a:?} vs the host's {b:?}");
                }
                worst = worst.max(d).max(dc);
            }
        }
    }
    // A non-finite gradient: a NaN coefficient on both paths, and the fused AdamW then
    // writes nothing (the step is skipped).
    let mut g = vec![Tensor::randn(0f32, 1.0, 4096, gpu)?];
    g.push((Tensor::ones(7, DType::F32, gpu)? * f64::INFINITY)?);
    let grads: Vec<Option<Tensor>> = g.into_iter().map(Some).collect();
    let nc = seam::clip::norm_and_coef(&grads, 1.0)?;
    let coef = nc.to_vec1::<f32>()?[1];
    if !coef.is_nan() {
        bail!("gradient norm kernel: an infinite gradient gives coefficient {coef}, not NaN");
    }
    let p = Var::from_tensor(&Tensor::randn(0f32, 1.0, 4096, gpu)?)?;
    let before = p.as_tensor().copy()?;
    let mut opt = AdamW::new(AdamWConfig::default())?;
    opt.set_grad_scale(Some(nc));
    opt.step(std::slice::from_ref(&p), &grads[..1])?;
    let d = (p.as_tensor() - &before)?
        .abs()?
        .max(0)?
        .to_scalar::<f32>()?;
    if d != 0.0 {
        bail!("fused AdamW with a NaN clipping coefficient changed the parameter by {d:e}: the step is not skipped");
    }
    Ok(worst)
}

fn has_bf16_grad(lm: &TransformerLm, b: &Batch) -> Result<bool> {
    let (_, grads) = forward_backward(lm, b, |_, _| Ok(()))?;
    Ok(grads.iter().flatten().any(|g| g.dtype() == DType::BF16))
}

/// Every fused op (model::kernels) on the GPU against its composition on the GPU, f32 and
/// bf16: (dtype, op, value error, gradient error), relative to the composition's largest
/// magnitude; fails above 1e-5 / 1e-4 (f32) or 3e-2 (bf16, 8-bit mantissa).
pub fn fused_kernels(gpu: &Device) -> Result<Vec<(DType, model::kernels::check::Comparison)>> {
    let mut out = Vec::new();
    for (dtype, tv, tg) in [(DType::F32, 1e-5f32, 1e-4f32), (DType::BF16, 3e-2, 3e-2)] {
        for c in model::kernels::check::compare_all(gpu, dtype)? {
            // Negated so that a NaN error fails too.
            if !(c.value <= tv && c.grad <= tg) {
                bail!(
                    "fused {} ({dtype:?}) on the GPU: value error {:.2e}, gradient error {:.2e}",
                    c.op,
                    c.value,
                    c.grad
                );
            }
            out.push((dtype, c));
        }
    }
    Ok(out)
}

/// `bench model-check`: every check above and the graph and GEMM checks, a line each.
pub fn print_all() -> Result<()> {
    let gpu = Device::new_cuda(0).context("model-check needs GPU 0")?;
    for line in crate::graph_reuse::run()? {
        println!("{line}");
    }
    for (dtype, dl, worst) in run(&gpu)? {
        println!("model-check {dtype:?}: |loss GPU - CPU| = {dl:.2e}, worst gradient error {worst:.2e} (relative): OK");
    }
    for dtype in [DType::F32, DType::BF16] {
        let d = fused_adamw(&gpu, dtype)?;
        println!("model-check fused AdamW vs candle-op AdamW, {dtype:?} model (its gradients as they come), 3 steps: max |param diff| = {d:.2e}: OK");
    }
    crate::graphcheck::print_all()?;
    for line in crate::gemmcheck::run(&gpu)? {
        println!("{line}");
    }
    println!("{}", crate::accumcheck::run(&gpu)?);
    let n = cast_bf16(&gpu)?;
    println!("model-check to_bf16 (four-at-a-time cast kernel) vs candle's cast: bit-identical in {n} cases: OK");
    let d = grad_norm(&gpu)?;
    println!("model-check gradient norm kernel (170 f32/bf16 gradients, offsets 0/1/4, 7 to 2^20+5 elements) vs the host's: worst relative error {d:.2e}; an infinite gradient: NaN coefficient, fused AdamW skips the step: OK");
    let d = fused_adamw_layouts(&gpu)?;
    println!("model-check fused AdamW kernels (f32/bf16 gradients, offsets 0/1/4, 4096/1003 elements) vs candle-op AdamW, 3 steps: max |param diff| = {d:.2e}: OK");
    #[cfg(feature = "cuda")]
    {
        let n = crate::adamwcheck::run(&gpu)?;
        println!("model-check grouped fused AdamW ({n} tensors, 64 a launch; f32/bf16 gradients at offsets 0/1/4; bf16 copies aligned, unaligned, none) vs the kernel a tensor, 3 steps: parameters, moments and copies bit-identical: OK");
    }
    for (dtype, c) in fused_kernels(&gpu)? {
        println!(
            "model-check fused {:<20} {dtype:?} vs composition (GPU): value {:.2e}, gradient {:.2e} (relative): OK",
            c.op, c.value, c.grad
        );
    }
    Ok(())
}

//! AdamW's update alone (`bench adamw`): the fused kernel (seam's kernels/adamw.cu) over
//! parameters shaped as LM `size`'s, as a bf16 step runs it (f32 masters and moments, bf16
//! gradients scaled by a clipping coefficient, a bf16 copy written), CUDA-event timed, the
//! mean over `iters` after a warm-up. It moves 28 bytes a parameter (reads p, m, v in f32
//! and g in bf16; writes p, m, v and the copy), and the rows give that rate beside a
//! device-to-device copy's (read and write counted), the memory's rate with nothing else.
//!
//! Layouts: `tensorwise` launches once per parameter tensor, as the step did until session
//! 59; `grouped` up to 64 tensors a launch (`seam::fused_adamw::group`), as the step does
//! now; `flat` once over one buffer of all of them (the difference is the launches' cost).
//! `tensorwise` and `flat` also at caps on the grid (the kernel then loops over its
//! elements).

use anyhow::Result;

const NO_CUDA: &str =
    "bench adamw times a CUDA kernel: this bench was built without the `cuda` feature";

/// One layout's timing.
pub struct Row {
    pub layout: String,
    pub launches: usize,
    /// Blocks a launch at most (`None`: the default, one pass of the kernel's loop a thread).
    pub cap: Option<u32>,
    pub bytes: u64,
    pub ms: f64,
    pub gb_per_s: f64,
}

/// `bench adamw`: the table, and a JSON line per layout appended to `out`.
pub fn main(size: &str, iters: usize, out: &std::path::Path) -> Result<()> {
    let cfg = crate::ddp::config(size).map_err(|e| anyhow::anyhow!("--size {size}: {e}"))?;
    // One layout's p, g, m, v and copy at a time: 16 bytes a parameter.
    let need = (cfg.param_count() as u64).checked_mul(16);
    crate::budget::ensure(&format!("--size {size}"), need, crate::budget::Mem::Gpu)?;
    if !cfg!(feature = "cuda") {
        anyhow::bail!(NO_CUDA);
    }
    let out = crate::records::Out::open(out)?;
    println!(
        "{:>6} {:>10} {:>8} {:>6} {:>8} {:>9} {:>7}",
        "size", "layout", "launches", "cap", "GB", "ms", "GB/s"
    );
    for r in run(&cfg, iters)? {
        let cap = r.cap.map_or("-".to_string(), |c| c.to_string());
        println!(
            "{size:>6} {:>10} {:>8} {cap:>6} {:>8.3} {:>9.4} {:>7.0}",
            r.layout,
            r.launches,
            r.bytes as f64 / 1e9,
            r.ms,
            r.gb_per_s
        );
        out.append(&serde_json::json!({
            "bench": "adamw", "size": size, "layout": r.layout, "launches": r.launches,
            "cap": r.cap, "bytes": r.bytes, "iters": iters, "ms": r.ms, "gb_per_s": r.gb_per_s,
        }))?;
    }
    Ok(())
}

#[cfg(not(feature = "cuda"))]
pub fn run(_cfg: &model::LmConfig, _iters: usize) -> Result<Vec<Row>> {
    anyhow::bail!(NO_CUDA)
}

/// The rows for `cfg`'s parameter shapes: tensorwise and flat at each cap, and the copy.
#[cfg(feature = "cuda")]
pub fn run(cfg: &model::LmConfig, iters: usize) -> Result<Vec<Row>> {
    use anyhow::Context;
    use candle_core::{DType, Device, Tensor};
    use seam::fused_adamw::{self as fa, StepScalars};
    let gpu = Device::new_cuda(0).context("the AdamW benchmark needs GPU 0")?;
    let Device::Cuda(cuda) = &gpu else {
        unreachable!()
    };
    let stream = cuda.cuda_stream();
    // The model's parameter tensors' sizes, in its order (the model is not built).
    let shapes: Vec<usize> = (cfg.shape().tensors().iter())
        .map(|&(n, _)| usize::try_from(n))
        .collect::<Result<_, _>>()?;
    let scalars = StepScalars {
        decay: 1.0 - 1e-4 * 0.1,
        b1: 0.9,
        b2: 0.95,
        eps: 1e-8,
        step_size: 1e-4,
        bc2_sqrt: 0.3,
    };
    // [norm, coef]: every gradient is scaled by the coefficient, as under clipping.
    let scale = Tensor::new(&[2.0f32, 0.5], &gpu)?;
    let timed = |launch: &mut dyn FnMut() -> Result<()>| crate::timer::mean_ms(&gpu, iters, launch);
    let row = |layout: &str, launches, cap, bytes: u64, ms: f64| Row {
        layout: layout.to_string(),
        launches,
        cap,
        bytes,
        ms,
        gb_per_s: bytes as f64 / (ms * 1e-3) / 1e9,
    };
    let total: usize = shapes.iter().sum();
    // p, m, v read and written in f32, g read and the copy written in bf16.
    let bytes = total as u64 * (3 * 4 * 2 + 2 + 2);
    // Parameters, gradients, moments and copies of the given element counts (zeros: the
    // bytes moved do not depend on the values).
    let alloc = |ns: &[usize]| -> Result<Vec<_>> {
        ns.iter()
            .map(|&n| {
                let p = Tensor::zeros(n, DType::F32, &gpu)?;
                let g = Tensor::zeros(n, DType::BF16, &gpu)?;
                let c = Tensor::zeros(n, DType::BF16, &gpu)?;
                let m = fa::zero_moments(&p)?;
                Ok((p, g, m, c))
            })
            .collect()
    };
    let mut s = fa::DeviceScalars::new(&scale)?;
    s.upload(scalars, "bench adamw")?;
    let mut rows = Vec::new();
    // The kernel's default (no cap: one pass of its loop a thread), then caps on the grid
    // (2,112 was the default before call 296).
    let caps = [None, Some(528), Some(2112), Some(4224)];
    {
        let mut each = alloc(&shapes)?;
        for cap in [None, Some(2112)] {
            let on = cap.map(|b| (&stream, Some(b)));
            let ms = timed(&mut || {
                for (p, g, m, c) in each.iter_mut() {
                    fa::step(p, g, m, &s, Some(c), on, Some(&scale))?;
                }
                Ok(())
            })?;
            rows.push(row("tensorwise", shapes.len(), cap, bytes, ms));
        }
        // Up to fa::group::MAX tensors a launch, as the step (seam::fused_adamw::group).
        let launches = shapes.len().div_ceil(fa::group::MAX);
        let ms = timed(&mut || {
            let mut items: Vec<fa::group::Item> = (each.iter_mut())
                .map(|(p, g, m, c)| fa::group::Item {
                    p,
                    g,
                    moments: m,
                    copy: Some(c),
                })
                .collect();
            Ok(fa::group::step(&mut items, &s, None, Some(&scale))?)
        })?;
        rows.push(row("grouped", launches, None, bytes, ms));
    }
    {
        let mut flat = alloc(&[total])?;
        let (p, g, m, c) = &mut flat[0];
        for cap in caps {
            let on = cap.map(|b| (&stream, Some(b)));
            let ms = timed(&mut || Ok(fa::step(p, g, m, &s, Some(c), on, Some(&scale))?))?;
            rows.push(row("flat", 1, cap, bytes, ms));
        }
    }
    {
        // A device-to-device copy of 1 GiB (2 GiB moved).
        let n = 1 << 28;
        let src = stream.alloc_zeros::<f32>(n)?;
        let mut dst = stream.alloc_zeros::<f32>(n)?;
        let ms = timed(&mut || Ok(stream.memcpy_dtod(&src, &mut dst)?))?;
        rows.push(row("copy", 1, None, 8 * n as u64, ms));
    }
    Ok(rows)
}

//! The clipping norm's pass alone (`bench gradnorm`): the global norm of gradients shaped as
//! an LM's parameters (random values, the model's dtype), through `seam::clip` as a step
//! takes it, each kernel layout of kernels/gradnorm.cu in turn; CUDA-event timed, the mean
//! over `iters` after a warm-up, and the bytes read per second. The layouts' norms must
//! agree (relative 1e-4: the same f32 sums in another order), else it fails.

use crate::timer::Timer;
use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use seam::clip::{norm_and_coef_in, Layout};

/// One layout's timing.
pub struct Row {
    pub layout: &'static str,
    pub tensors: usize,
    pub bytes: u64,
    pub ms: f64,
    pub gb_per_s: f64,
    pub norm: f32,
}

/// `bench gradnorm`: the table, and a JSON line per layout appended to `out`.
pub fn main(size: &str, bf16: bool, iters: usize, out: &std::path::Path) -> Result<()> {
    // The model's f32 parameters (built for their shapes), then the gradients.
    let cfg = crate::ddp::config(size).map_err(|e| anyhow::anyhow!("--size {size}: {e}"))?;
    let need = (cfg.param_count() as u64).checked_mul(if bf16 { 4 + 2 } else { 4 + 4 });
    crate::budget::ensure(&format!("--size {size}"), need, crate::budget::Mem::Gpu)?;
    let out = crate::records::Out::open(out)?;
    let dtype = if bf16 { "bf16" } else { "fp32" };
    println!(
        "{:>6} {:>5} {:>11} {:>7} {:>9} {:>9} {:>7}",
        "size", "dtype", "layout", "tensors", "GB", "ms", "GB/s"
    );
    for r in run(size, bf16, iters)? {
        let gb = r.bytes as f64 / 1e9;
        println!(
            "{size:>6} {dtype:>5} {:>11} {:>7} {gb:>9.3} {:>9.4} {:>7.0}",
            r.layout, r.tensors, r.ms, r.gb_per_s
        );
        out.append(&serde_json::json!({
            "bench": "gradnorm", "size": size, "dtype": dtype, "layout": r.layout,
            "tensors": r.tensors, "bytes": r.bytes, "iters": iters, "ms": r.ms,
            "gb_per_s": r.gb_per_s, "norm": r.norm,
        }))?;
    }
    Ok(())
}

/// Rows for the flat and the tensor-by-tensor layout, LM `size`'s parameter shapes.
pub fn run(size: &str, bf16: bool, iters: usize) -> Result<Vec<Row>> {
    let gpu = Device::new_cuda(0).context("the gradient-norm benchmark needs GPU 0")?;
    let dt = if bf16 { DType::BF16 } else { DType::F32 };
    // The shapes of the model's parameters; the model itself is dropped before timing.
    let shapes: Vec<_> = {
        let m = model::named::build(size, 0, &gpu)?;
        m.params()
            .vars()
            .iter()
            .map(|v| v.shape().clone())
            .collect()
    };
    let grads = shapes
        .iter()
        .map(|s| Ok(Some(Tensor::randn(0f32, 1e-3, s, &gpu)?.to_dtype(dt)?)))
        .collect::<Result<Vec<_>>>()?;
    let bytes = (grads
        .iter()
        .flatten()
        .map(|g| g.elem_count())
        .sum::<usize>()
        * dt.size_in_bytes()) as u64;
    let mut rows = Vec::new();
    for (layout, name) in [(Layout::Flat, "flat"), (Layout::Tensorwise, "tensorwise")] {
        let norm = norm_and_coef_in(Some(layout), &grads, 1.0)?.to_vec1::<f32>()?[0];
        let t = Timer::start(&gpu)?;
        for _ in 0..iters {
            norm_and_coef_in(Some(layout), &grads, 1.0)?;
        }
        let ms = t.stop()? / iters as f64 * 1e3;
        rows.push(Row {
            layout: name,
            tensors: grads.len(),
            bytes,
            ms,
            gb_per_s: bytes as f64 / (ms * 1e-3) / 1e9,
            norm,
        });
    }
    let (a, b) = (rows[0].norm as f64, rows[1].norm as f64);
    // NaN on either side fails too.
    if (a - b).abs().is_nan() || (a - b).abs() > 1e-4 * b.abs() {
        bail!("gradnorm: the layouts disagree: flat {a}, tensorwise {b}");
    }
    Ok(rows)
}

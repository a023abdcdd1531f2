//! The seeds' RMSNorm micro-benchmark: 50,000 rows × {1024, 2048, 4096, 8192}, f32; the
//! fused kernel against the plain-op composition and a LayerNorm, forward and forward +
//! backward, mean over `iters` after a warm-up, CUDA-event timed.

use crate::timer::mean_ms;
use anyhow::Result;
use candle_core::{Device, Tensor, Var};
use model::layers::{layer_norm, rms_norm};
use model::rmsnorm::rms_norm_fused;

type Norm = fn(&Tensor, &Tensor, &Tensor) -> model::Result<Tensor>;

/// Rows of (cols, variant, fwd ms, fwd+bwd ms).
pub fn run(
    device: &Device,
    rows: usize,
    iters: usize,
) -> Result<Vec<(usize, &'static str, f64, f64)>> {
    let variants: [(&str, Norm); 3] = [
        ("fused", |x, w, _| rms_norm_fused(x, w, 1e-5)),
        ("composed", |x, w, _| rms_norm(x, w, 1e-5)),
        ("layernorm", |x, w, b| layer_norm(x, w, b, 1e-5)),
    ];
    let mut out = Vec::new();
    for cols in [1024, 2048, 4096, 8192] {
        let x = Var::from_tensor(&Tensor::randn(0f32, 1.0, (rows, cols), device)?)?;
        let w = Var::from_tensor(&Tensor::ones(cols, candle_core::DType::F32, device)?)?;
        let b = Var::from_tensor(&Tensor::zeros(cols, candle_core::DType::F32, device)?)?;
        let g = Tensor::randn(0f32, 1.0, (rows, cols), device)?;
        for (name, f) in variants {
            let fwd = mean_ms(device, iters, &mut || {
                f(x.as_tensor(), w.as_tensor(), b.as_tensor())?;
                Ok(())
            })?;
            let both = mean_ms(device, iters, &mut || {
                let y = f(x.as_tensor(), w.as_tensor(), b.as_tensor())?;
                (y * &g)?.sum_all()?.backward()?;
                Ok(())
            })?;
            out.push((cols, name, fwd, both));
        }
    }
    Ok(out)
}

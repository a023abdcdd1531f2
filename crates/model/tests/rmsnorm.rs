//! The fused RMSNorm against the differentiable composition: values and both gradients.

use candle_core::{Device, Tensor, Var};
use model::layers::rms_norm;
use model::rmsnorm::rms_norm_fused;

fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
    (a - b)
        .unwrap()
        .abs()
        .unwrap()
        .flatten_all()
        .unwrap()
        .max(0)
        .unwrap()
        .to_scalar::<f32>()
        .unwrap()
}

#[test]
fn fused_rms_norm_matches_the_composition_on_cpu() {
    let dev = Device::Cpu;
    let x = Var::from_tensor(&Tensor::randn(0f32, 2.0, (3, 5, 48), &dev).unwrap()).unwrap();
    let w = Var::from_tensor(&Tensor::randn(1f32, 0.3, 48, &dev).unwrap()).unwrap();
    let up = Tensor::randn(0f32, 1.0, (3, 5, 48), &dev).unwrap();
    let yf = rms_norm_fused(x.as_tensor(), w.as_tensor(), 1e-5).unwrap();
    let yc = rms_norm(x.as_tensor(), w.as_tensor(), 1e-5).unwrap();
    assert!(max_diff(&yf, &yc) < 1e-5);
    let gf = (&yf * &up).unwrap().sum_all().unwrap().backward().unwrap();
    let gc = (&yc * &up).unwrap().sum_all().unwrap().backward().unwrap();
    for v in [&x, &w] {
        let d = max_diff(
            gf.get(v.as_tensor()).unwrap(),
            gc.get(v.as_tensor()).unwrap(),
        );
        assert!(d < 1e-4, "gradient differs by {d}");
    }
}

//! The fused ops' CPU implementations against their compositions of plain ops (values and
//! gradients), and their input checks.

use candle_core::{DType, Device, Tensor};
use model::kernels::{self, check};

#[test]
fn every_fused_op_matches_its_composition_on_cpu() {
    let rows = check::compare_all(&Device::Cpu, DType::F32).unwrap();
    assert_eq!(rows.len(), 12, "{rows:?}");
    for c in &rows {
        assert!(c.value < 2e-6, "{}: values differ by {:.2e}", c.op, c.value);
        assert!(
            c.grad < 2e-5,
            "{}: gradients differ by {:.2e}",
            c.op,
            c.grad
        );
    }
}

#[test]
fn bf16_on_cpu_falls_back_to_the_composition() {
    let rows = check::compare_all(&Device::Cpu, DType::BF16).unwrap();
    for c in rows.iter().filter(|c| c.op != "cross_entropy") {
        assert_eq!((c.value, c.grad), (0.0, 0.0), "{}", c.op);
    }
}

#[test]
fn causal_softmax_masks_future_keys_and_rows_sum_to_one() {
    let x = Tensor::randn(0f32, 3.0, (2, 4, 4), &Device::Cpu).unwrap();
    let y = kernels::causal_softmax(&x, 1.0).unwrap();
    let v: Vec<Vec<Vec<f32>>> = y.to_vec3().unwrap();
    for m in &v {
        for (q, row) in m.iter().enumerate() {
            assert!(row[q + 1..].iter().all(|&p| p == 0.0), "{row:?}");
            assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        }
    }
}

#[test]
fn bad_inputs_name_what_is_wrong() {
    let dev = Device::Cpu;
    let err = |r: model::Result<Tensor>| r.unwrap_err().to_string();
    let logits = Tensor::zeros((3, 5), DType::F32, &dev).unwrap();
    let t = Tensor::new(&[0u32, 7, 1], &dev).unwrap();
    assert!(err(kernels::cross_entropy(&logits, &t)).contains("target 7 is out of range for 5"));
    let t2 = Tensor::new(&[0u32, 1], &dev).unwrap();
    assert!(err(kernels::cross_entropy(&logits, &t2)).contains("(N, V) and targets (N,)"));
    let x = Tensor::zeros((2, 5, 3), DType::F32, &dev).unwrap();
    assert!(err(kernels::causal_softmax(&x, 1.0)).contains("tq <= tk"));
    let (c, s) = model::layers::rope_tables(4, 6, 1e4, &dev).unwrap();
    let x = Tensor::zeros((1, 5, 6), DType::F32, &dev).unwrap();
    assert!(err(kernels::rope(&x, &c, &s)).contains("cos table must be (5, 3)"));
    let a = Tensor::zeros((2, 3), DType::F32, &dev).unwrap();
    let b = Tensor::zeros((3, 2), DType::F32, &dev).unwrap();
    assert!(err(kernels::silu_mul(&a, &b)).contains("shapes differ"));
}

//! The ToyModel: its staged backward equals one backward, and bad input is named.

use candle_core::{Device, Tensor};
use model::{forward_backward, Batch, StagedModel, ToyModel};

#[test]
fn toy_model_staged_backward_equals_one_backward() {
    let dev = Device::Cpu;
    let m = ToyModel::new(6, 4, 9, &dev).unwrap();
    let input = Tensor::randn(0f32, 1.0, (8, 6), &dev).unwrap();
    let targets = Tensor::new(&[0u32, 1, 2, 3, 3, 2, 1, 0], &dev).unwrap();
    let batch = Batch::new(input, targets);
    let store = m.loss(&batch).unwrap().backward().unwrap();
    let (_, grads) = forward_backward(&m, &batch, |_, _| Ok(())).unwrap();
    for (i, v) in m.params().vars().iter().enumerate() {
        let d = (store.get(v.as_tensor()).unwrap() - grads[i].as_ref().unwrap()).unwrap();
        let d = d
            .abs()
            .unwrap()
            .flatten_all()
            .unwrap()
            .max(0)
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        assert!(d < 1e-6, "{}: {d}", m.params().names()[i]);
    }
    let bad = Batch::new(
        Tensor::zeros((2, 5), candle_core::DType::F32, &dev).unwrap(),
        Tensor::new(&[0u32, 1], &dev).unwrap(),
    );
    assert!(m.loss(&bad).unwrap_err().to_string().contains("5 features"));
    let bad = Batch::new(
        Tensor::zeros((2, 6), candle_core::DType::F32, &dev).unwrap(),
        Tensor::new(&[0u32, 4], &dev).unwrap(),
    );
    assert!(m
        .loss(&bad)
        .unwrap_err()
        .to_string()
        .contains("target class 4"));
}

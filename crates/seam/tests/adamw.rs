//! AdamW against PyTorch's algorithm (torch.optim.AdamW, single-tensor path), written out
//! in f64 for three steps with weight decay, on fixed inputs.

use candle_core::{Device, Tensor, Var};
use seam::{AdamW, AdamWConfig};

/// torch/optim/adamw.py `_single_tensor_adamw`, scalar, in f64.
fn reference(p0: &[f64], grads: &[Vec<f64>], c: AdamWConfig) -> Vec<f64> {
    let mut p = p0.to_vec();
    let (mut m, mut v) = (vec![0.0; p.len()], vec![0.0; p.len()]);
    for (t, g) in grads.iter().enumerate() {
        let step = (t + 1) as i32;
        for i in 0..p.len() {
            p[i] *= 1.0 - c.lr * c.weight_decay;
            m[i] += (g[i] - m[i]) * (1.0 - c.beta1); // exp_avg.lerp_(grad, 1 - beta1)
            v[i] = v[i] * c.beta2 + (1.0 - c.beta2) * g[i] * g[i];
            let bc1 = 1.0 - c.beta1.powi(step);
            let bc2_sqrt = (1.0 - c.beta2.powi(step)).sqrt();
            let denom = v[i].sqrt() / bc2_sqrt + c.eps;
            p[i] -= c.lr / bc1 * m[i] / denom;
        }
    }
    p
}

#[test]
fn adamw_matches_pytorch_within_1e6() {
    let c = AdamWConfig {
        lr: 1e-2,
        beta1: 0.9,
        beta2: 0.95,
        eps: 1e-8,
        weight_decay: 0.1,
    };
    let p0 = [0.5, -1.25, 2.0, 0.0, 3.5, -0.75];
    let grads: Vec<Vec<f64>> = vec![
        vec![0.1, -0.2, 0.3, 0.0, -1.5, 2.5],
        vec![-0.05, 0.4, 0.3, 1e-4, -1.0, 0.5],
        vec![0.2, 0.2, -0.3, -2.0, 0.0, 0.25],
    ];
    let var = Var::from_tensor(&Tensor::new(&p0.map(|x| x as f32), &Device::Cpu).unwrap()).unwrap();
    let mut opt = AdamW::new(c).unwrap();
    for g in &grads {
        let gt = Tensor::new(
            g.iter().map(|&x| x as f32).collect::<Vec<_>>().as_slice(),
            &Device::Cpu,
        )
        .unwrap();
        opt.step(std::slice::from_ref(&var), &[Some(gt)]).unwrap();
    }
    let got = var.as_tensor().to_vec1::<f32>().unwrap();
    let want = reference(&p0, &grads, c);
    for (g, w) in got.iter().zip(&want) {
        assert!((*g as f64 - w).abs() < 1e-6, "got {got:?}\nwant {want:?}");
    }
    // The same inputs through torch.optim.AdamW 2.11 (scripts/anchors/adamw_ref.py, run on
    // the GPU machine, nvidia-h200-x2, 2026-11-22).
    let torch = [
        0.47935304,
        -1.24509752,
        1.97141612,
        -0.00110927504,
        3.51686668,
        -0.772817194,
    ];
    for (g, w) in got.iter().zip(&torch) {
        assert!((*g as f64 - w).abs() < 1e-6, "got {got:?}\ntorch {torch:?}");
    }
    assert!(AdamW::new(AdamWConfig { beta1: 1.0, ..c }).is_err());
}

/// `step_each_in` updates in the given order (the callback sees it), gives the same
/// parameters and state as `step`, and rejects an order that is not a permutation.
#[test]
fn step_each_in_follows_the_order_and_matches_step() {
    let dev = Device::Cpu;
    let make = |k: f32| -> Vec<Var> {
        (0..3)
            .map(|i| {
                Var::from_tensor(&Tensor::new(&[k * i as f32, 1.0 - k], &dev).unwrap()).unwrap()
            })
            .collect()
    };
    let grads: Vec<Option<Tensor>> = (0..3)
        .map(|i| Some(Tensor::new(&[0.3 * i as f32 - 0.2, 0.7], &dev).unwrap()))
        .collect();
    let (a, b) = (make(0.5), make(0.5));
    let (mut oa, mut ob) = (
        AdamW::new(AdamWConfig::default()).unwrap(),
        AdamW::new(AdamWConfig::default()).unwrap(),
    );
    for _ in 0..3 {
        oa.step(&a, &grads).unwrap();
        let mut seen = Vec::new();
        ob.step_each_in(&b, &grads, [2, 0, 1], |i| {
            seen.push(i);
            Ok::<(), seam::ModelError>(())
        })
        .unwrap();
        assert_eq!(seen, [2, 0, 1]);
    }
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(
            x.as_tensor().to_vec1::<f32>().unwrap(),
            y.as_tensor().to_vec1::<f32>().unwrap()
        );
    }
    for bad in [vec![0, 1], vec![0, 1, 1], vec![0, 1, 3]] {
        let err = ob
            .step_each_in(&b, &grads, bad, |_| Ok::<(), seam::ModelError>(()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a permutation"), "{err}");
    }
}

/// `step_spans_together` queues a group's updates (consecutive spans in the order for which
/// the predicate holds) before it calls `after` for any of them: when `after` sees a span,
/// every span of its group is already updated, and none of the next group is. The
/// parameters equal `step`'s, a span without a gradient is skipped (no callback).
#[test]
fn step_spans_together_updates_a_group_before_its_callbacks() {
    let dev = Device::Cpu;
    let make = || -> Vec<Var> {
        (0..5)
            .map(|i| Var::from_tensor(&Tensor::new(&[i as f32, 1.0], &dev).unwrap()).unwrap())
            .collect()
    };
    let mut grads: Vec<Option<Tensor>> = (0..5)
        .map(|i| Some(Tensor::new(&[0.3 * i as f32 - 0.2, 0.7], &dev).unwrap()))
        .collect();
    grads[3] = None;
    let (a, b) = (make(), make());
    let spans: Vec<seam::Span> = b.iter().map(seam::Span::whole).collect();
    let (mut oa, mut ob) = (
        AdamW::new(AdamWConfig::default()).unwrap(),
        AdamW::new(AdamWConfig::default()).unwrap(),
    );
    // Groups in the order [4, 3, 2, 1, 0]: {4, 3, 2} and {1, 0}.
    let group = |i: usize| usize::from(i < 2);
    for step in 0..2 {
        oa.step(&a, &grads).unwrap();
        let before: Vec<Vec<f32>> = b.iter().map(|v| v.as_tensor().to_vec1().unwrap()).collect();
        let mut seen = Vec::new();
        ob.step_spans_together(
            &spans,
            &grads,
            (0..5).rev(),
            |i, j| group(i) == group(j),
            |k| {
                let moved = |j: usize| b[j].as_tensor().to_vec1::<f32>().unwrap() != before[j];
                for j in [4, 2, 1, 0] {
                    assert_eq!(
                        moved(j),
                        group(j) <= group(k),
                        "step {step}: span {j} at after({k})"
                    );
                }
                seen.push(k);
                Ok::<(), seam::ModelError>(())
            },
            None,
        )
        .unwrap();
        assert_eq!(seen, [4, 2, 1, 0]);
    }
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(
            x.as_tensor().to_vec1::<f32>().unwrap(),
            y.as_tensor().to_vec1::<f32>().unwrap()
        );
    }
}

//! The LM on the CPU: loss at initialisation, staged backward equal to one backward,
//! overfitting a fixed batch, and bad inputs named.

use candle_core::{Device, Tensor};
use model::{forward_backward, AdamW, AdamWConfig, Batch, LmConfig, StagedModel, TransformerLm};
use rand::{Rng, SeedableRng};

fn random_batch(lm: &TransformerLm, b: usize, t: usize, seed: u64) -> Batch {
    let mut r = rand::rngs::StdRng::seed_from_u64(seed);
    let v = lm.config().vocab as u32;
    let ids: Vec<u32> = (0..b * t).map(|_| r.random_range(0..v)).collect();
    let tg: Vec<u32> = (0..b * t).map(|_| r.random_range(0..v)).collect();
    Batch::new(
        lm.tokens(&ids, b, &Device::Cpu).unwrap(),
        lm.tokens(&tg, b, &Device::Cpu).unwrap(),
    )
}

#[test]
fn loss_at_initialisation_is_near_ln_vocab() {
    let lm = TransformerLm::new(LmConfig::tiny(10_000), 1, &Device::Cpu).unwrap();
    assert_eq!(lm.params().numel(), lm.config().param_count());
    let loss = lm
        .loss(&random_batch(&lm, 2, 32, 7))
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    let want = (10_000f32).ln();
    assert!((loss - want).abs() < 0.1, "loss {loss}, ln(10000) = {want}");
}

#[test]
fn staged_backward_equals_one_backward() {
    // Blocks hand-written (block.rs) and under candle's autograd, both against one backward.
    for hand in [true, false] {
        staged_equals_one_backward(hand);
    }
}

fn staged_equals_one_backward(hand: bool) {
    let mut lm = TransformerLm::new(LmConfig::tiny(50), 3, &Device::Cpu).unwrap();
    lm.set_hand_written_backward(hand);
    let batch = random_batch(&lm, 2, 16, 11);
    let full = lm.loss(&batch).unwrap();
    let store = full.backward().unwrap();
    let mut seen = Vec::new();
    let (loss, grads) = forward_backward(&lm, &batch, |s, g| {
        // Every parameter of stage s is final when the callback runs.
        assert!(lm.stage_params(s).iter().all(|&i| g[i].is_some()));
        seen.push(s);
        Ok(())
    })
    .unwrap();
    assert_eq!(seen, (0..lm.num_stages()).rev().collect::<Vec<_>>());
    assert!((loss.to_scalar::<f32>().unwrap() - full.to_scalar::<f32>().unwrap()).abs() < 1e-6);
    for (i, v) in lm.params().vars().iter().enumerate() {
        let want = store.get(v.as_tensor()).unwrap();
        let got = grads[i].as_ref().unwrap();
        let diff = (want - got)
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        assert!(
            diff < 1e-6,
            "hand-written {hand}, {}: max |diff| {diff}",
            lm.params().names()[i]
        );
    }
}

#[test]
fn a_tiny_model_overfits_a_fixed_batch() {
    let lm = TransformerLm::new(LmConfig::tiny(64), 5, &Device::Cpu).unwrap();
    let batch = random_batch(&lm, 4, 16, 13);
    let mut opt = AdamW::new(AdamWConfig {
        lr: 1e-2,
        weight_decay: 0.0,
        ..AdamWConfig::default()
    })
    .unwrap();
    let mut loss = f32::MAX;
    for step in 0..300 {
        let (l, grads) = forward_backward(&lm, &batch, |_, _| Ok(())).unwrap();
        loss = l.to_scalar::<f32>().unwrap();
        if loss < 1.0 {
            eprintln!("loss {loss} after {step} steps");
            break;
        }
        opt.step(lm.params().vars(), &grads).unwrap();
    }
    assert!(loss < 1.0, "loss {loss} after 300 steps");
}

#[test]
fn bad_inputs_are_named() {
    let lm = TransformerLm::new(LmConfig::tiny(100), 0, &Device::Cpu).unwrap();
    let long = vec![1u32; 33];
    let e = lm.tokens(&long, 1, &Device::Cpu).unwrap_err().to_string();
    assert!(
        e.contains("sequence length 33") && e.contains("context 32"),
        "{e}"
    );
    let e = lm
        .tokens(&[1, 100, 3, 4], 1, &Device::Cpu)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("token id 100") && e.contains("vocabulary 100"),
        "{e}"
    );
    let ok = lm.tokens(&[1, 2, 3, 4], 1, &Device::Cpu).unwrap();
    let bad_targets = Tensor::new(&[[1u32, 2, 3]], &Device::Cpu).unwrap();
    let e = lm
        .loss(&Batch::new(ok, bad_targets))
        .unwrap_err()
        .to_string();
    assert!(e.contains("do not match"), "{e}");
}

/// Activation checkpointing runs each block's forward again before its backward: the same
/// loss and gradients, bit for bit, hand-written or under autograd.
#[test]
fn checkpointed_blocks_give_the_same_gradients_bit_for_bit() {
    for hand in [true, false] {
        let run = |ac: bool| {
            let mut lm = TransformerLm::new(LmConfig::tiny(50), 3, &Device::Cpu).unwrap();
            lm.set_hand_written_backward(hand);
            lm.set_activation_checkpointing(ac);
            let blocks = (0..lm.num_stages()).filter(|&s| lm.checkpointed(s)).count();
            assert_eq!(blocks, if ac { lm.config().layers } else { 0 });
            let batch = random_batch(&lm, 2, 16, 11);
            let (loss, grads) = forward_backward(&lm, &batch, |_, _| Ok(())).unwrap();
            let bits = |t: &Tensor| -> Vec<u32> {
                let v = t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
                v.into_iter().map(f32::to_bits).collect()
            };
            let grads: Vec<Vec<u32>> = grads.iter().map(|g| bits(g.as_ref().unwrap())).collect();
            (loss.to_scalar::<f32>().unwrap().to_bits(), grads)
        };
        let (plain, checkpointed) = (run(false), run(true));
        assert_eq!(plain.0, checkpointed.0, "hand-written {hand}: the loss");
        assert!(
            plain.1 == checkpointed.1,
            "hand-written {hand}: a gradient differs"
        );
    }
}

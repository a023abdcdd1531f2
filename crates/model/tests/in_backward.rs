//! AdamW inside the staged backward (seam::in_backward) on the CPU: the same parameters,
//! bit for bit, as AdamW after the backward, with every gradient taken by its stage; and
//! a second stream refused on the CPU by name.

use candle_core::{Device, Tensor};
use model::{
    forward, forward_backward, AdamW, AdamWConfig, Batch, InBackward, LmConfig, SideStream,
    StagedModel, TransformerLm,
};

fn batch(lm: &TransformerLm, s: u32) -> Batch {
    let ids: Vec<u32> = (0..2 * 16).map(|i| (i * 37 + s * 101) % 512).collect();
    let tg: Vec<u32> = (0..2 * 16).map(|i| (i * 91 + s * 53) % 512).collect();
    Batch::new(
        lm.tokens(&ids, 2, &Device::Cpu).unwrap(),
        lm.tokens(&tg, 2, &Device::Cpu).unwrap(),
    )
}

fn adamw() -> AdamW {
    AdamW::new(AdamWConfig {
        lr: 1e-2,
        weight_decay: 0.1,
        ..AdamWConfig::default()
    })
    .unwrap()
}

fn values(t: &Tensor) -> Vec<f32> {
    t.flatten_all().unwrap().to_vec1().unwrap()
}

#[test]
fn adamw_in_the_backward_equals_adamw_after_it_bit_for_bit() {
    let after = TransformerLm::new(LmConfig::tiny(512), 3, &Device::Cpu).unwrap();
    let inside = TransformerLm::new(LmConfig::tiny(512), 3, &Device::Cpu).unwrap();
    let (mut o1, mut o2) = (adamw(), adamw());
    for s in 0..4 {
        let (_, g) = forward_backward(&after, &batch(&after, s), |_, _| Ok(())).unwrap();
        o1.step_params(after.params(), &g).unwrap();

        let tape = forward(&inside, &batch(&inside, s)).unwrap();
        let mut ib = InBackward::begin(&mut o2, inside.params(), None).unwrap();
        let left = tape
            .backward(|st, g| ib.stage(&inside.stage_params(st), g))
            .unwrap();
        ib.finish().unwrap();
        assert!(
            left.iter().all(Option::is_none),
            "every gradient is taken by its stage"
        );
    }
    assert_eq!(o1.steps_taken(), o2.steps_taken());
    let names = after.params().names();
    for (i, (a, b)) in after
        .params()
        .vars()
        .iter()
        .zip(inside.params().vars())
        .enumerate()
    {
        let (a, b) = (values(a.as_tensor()), values(b.as_tensor()));
        assert!(a == b, "{} differs after 4 steps", names[i]);
    }
    // The updates moved the weights (the comparison is not between untouched copies).
    let fresh = TransformerLm::new(LmConfig::tiny(512), 3, &Device::Cpu).unwrap();
    let moved = values(fresh.params().vars()[1].as_tensor())
        != values(after.params().vars()[1].as_tensor());
    assert!(moved, "AdamW changed nothing");
}

#[test]
fn a_second_stream_on_the_cpu_is_refused_by_name() {
    let e = SideStream::new(&Device::Cpu)
        .err()
        .expect("no stream on the CPU");
    assert!(e.to_string().contains("CUDA device"), "{e}");
}

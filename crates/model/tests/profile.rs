//! The profiling marks: one per component, in step order, the same in every block, and
//! nothing recorded without a hook.

use candle_core::Device;
use model::{profile, Batch, LmConfig, StagedModel, TransformerLm};
use std::sync::{Arc, Mutex};

#[test]
fn every_block_marks_its_components_in_order() {
    let lm = TransformerLm::new(LmConfig::tiny(64), 0, &Device::Cpu).unwrap();
    let ids: Vec<u32> = (0..2 * 16).map(|i| i % 64).collect();
    let b = Batch::new(
        lm.tokens(&ids, 2, &Device::Cpu).unwrap(),
        lm.tokens(&ids, 2, &Device::Cpu).unwrap(),
    );
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    profile::set_hook(Some(Box::new(move |l| {
        s.lock().unwrap().push(l.to_string())
    })));
    model::forward_backward(&lm, &b, |_, _| Ok(())).unwrap();
    profile::set_hook(None);
    model::forward_backward(&lm, &b, |_, _| Ok(())).unwrap(); // no hook: nothing recorded
    let seen: Vec<String> = seen.lock().unwrap().clone();
    let seen: Vec<&str> = seen.iter().map(String::as_str).collect();
    let layers = lm.config().layers;
    let count = |l: &str| seen.iter().filter(|&&x| x == l).count();
    assert_eq!(seen.first(), Some(&"fwd/embedding"));
    assert_eq!(seen.last(), Some(&"bwd/embedding"));
    assert_eq!(seen[seen.len() - 2], "bwd/block/attn/norm");
    for l in [
        "fwd/block/attn/softmax",
        "fwd/block/ffn/w2",
        "bwd/block/attn/rope",
        "bwd/block/ffn/w2",
    ] {
        assert_eq!(count(l), layers, "{l} in {seen:?}");
    }
    // The last stage's hand-written backward marks its parts, before any block's.
    for l in [
        "fwd/head/loss",
        "bwd/head/loss",
        "bwd/head/proj",
        "bwd/head/norm",
    ] {
        assert_eq!(count(l), 1, "{l} in {seen:?}");
    }
    // Forward marks of a block come in model order.
    let pos = |l: &str| seen.iter().position(|&x| x == l).unwrap();
    assert!(pos("fwd/block/attn/norm") < pos("fwd/block/attn/softmax"));
    assert!(pos("fwd/block/attn/out_proj") < pos("fwd/block/ffn/swiglu"));
    assert!(pos("bwd/head/norm") < pos("bwd/block/ffn/w2"));
    // The embedding forward and backward + 11 per block forward and backward + the head's
    // 3 forward, 3 backward.
    assert_eq!(seen.len(), 2 * layers * 11 + 8, "{seen:?}");
    let _ = lm.num_stages();
}

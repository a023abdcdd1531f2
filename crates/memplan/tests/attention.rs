//! What the plan counts for the attention's activations, by kernel (`model::kernels::attn`).

use memplan::{plan, Input, Shape, Strategy};

/// The activations of the 6.7B on one GPU with `rows` sequences of `t` tokens.
fn activations(t: usize, rows: usize, bf16: bool) -> u64 {
    let shape = Shape::by_name("6.7B", 10_000, t).unwrap();
    let i = Input {
        bf16,
        ..Input::train_defaults(shape, 1, rows)
    };
    plan(&i, Strategy::Single).bytes.activations
}

/// Above 128 tokens the bf16 attention is tiled and keeps each row's log-sum-exp, no
/// probabilities: the same tokens a micro-batch hold the same activations at any length.
/// The composed ops (f32) keep heads·t probabilities a token, which grow with t.
#[test]
fn the_tiled_attention_keeps_no_probabilities() {
    assert_eq!(activations(512, 8, true), activations(1024, 4, true));
    assert_eq!(activations(1024, 4, true), activations(2048, 2, true));
    // f32: heads·t probabilities a token, more at the longer length.
    assert!(activations(1024, 4, false) > activations(512, 8, false));
}

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

/// At multiples of 64 tokens the bf16 attention is tiled and keeps each row's log-sum-exp, no
/// probabilities: what the same tokens a micro-batch hold grows with the length only by the
/// tiled backward's dSᵀ of each pair of 64-token tiles, heads·(t + 64)/2 bf16 a token, in
/// one block's backward. The composed ops (f32) keep heads·t probabilities a token in every
/// block.
#[test]
fn the_tiled_attention_keeps_no_probabilities() {
    let (heads, tokens) = (32u64, 4096u64);
    let ds = |t: u64| heads * (t + 64) / 2 * tokens * 2;
    assert_eq!(
        activations(1024, 4, true) - activations(512, 8, true),
        ds(1024) - ds(512)
    );
    assert_eq!(
        activations(2048, 2, true) - activations(1024, 4, true),
        ds(2048) - ds(1024)
    );
    // f32: heads·t probabilities a token in all 32 blocks, far more at the longer length.
    let f32_growth = activations(1024, 4, false) - activations(512, 8, false);
    assert!(f32_growth > 32 * (ds(1024) - ds(512)));
}

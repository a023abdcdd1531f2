//! The plan under activation checkpointing (`Input::checkpointed`).

use memplan::{check, plan, Bytes, Input, Phase, Shape, Strategy};

const GIB: f64 = (1u64 << 30) as f64;

/// `train run`'s defaults for the 13B at 2048 tokens, 8 sequences a GPU, world 4.
fn input(checkpointed: bool) -> Input {
    let shape = Shape::by_name("13B", 10_000, 2048).unwrap();
    Input {
        checkpointed,
        ..Input::train_defaults(shape, 4, 8)
    }
}

/// Each block keeps its input alone (n·d bf16 elements) until its backward, which holds
/// that block's activations, made again; everything else is as without. The 13B at 2048
/// tokens, 8 sequences a GPU, fits 139 GiB at world 4 only so.
#[test]
fn checkpointed_blocks_keep_their_inputs_alone() {
    let at = |checkpointed: bool| plan(&input(checkpointed), Strategy::Fsdp);
    let (plain, ac) = (at(false), at(true));
    assert_eq!((plain.at, ac.at), (Phase::LastBlock, Phase::LastBlock));
    // Per block, bf16: x, h1, qkv, y, x2, h2 (8d), the SwiGLU's 3·d_ff, each head's f32
    // log-sum-exp (the tiled attention, 2048 tokens) a token; checkpointed, the input x (d)
    // alone, but for the block run back.
    let (n, d, f, h, l) = (8 * 2048u64, 5120u64, 13824u64, 40u64, 40u64);
    let block = 2 * n * (8 * d + 3 * f + 2 * h);
    let input = 2 * n * d;
    assert_eq!(
        plain.bytes.activations - ac.bytes.activations,
        (l - 1) * (block - input)
    );
    let rest = |b: Bytes| Bytes {
        activations: 0,
        ..b
    };
    assert_eq!(rest(plain.bytes), rest(ac.bytes));
    let free = (139.0 * GIB) as u64;
    assert!(
        plain.peak() > free && ac.peak() < free,
        "{} and {} GiB",
        plain.peak() as f64 / GIB,
        ac.peak() as f64 / GIB
    );
}

/// A refusal says where checkpointing the activations would make the run fit, and only
/// there.
#[test]
fn a_refusal_names_activation_checkpointing_where_it_would_fit() {
    let rows = |_| Some(8);
    let free = |gib: f64| ((gib * GIB) as u64, "free (test)");
    let s = (Strategy::Fsdp, "fsdp");
    let e = check("13B", &input(false), s, free(139.0), &rows).unwrap_err();
    assert!(e.contains("With --activation-checkpointing"), "{e}");
    assert!(e.contains("it fits"), "{e}");
    assert!(check("13B", &input(true), s, free(139.0), &rows).is_ok());
    let e = check("13B", &input(false), s, free(40.0), &rows).unwrap_err();
    assert!(!e.contains("--activation-checkpointing"), "{e}");
}

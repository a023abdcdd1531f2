//! The plan under activation checkpointing (`Input::checkpointing`).

use memplan::{check, plan, Bytes, Checkpointing, Input, Phase, Shape, Strategy};

const GIB: f64 = (1u64 << 30) as f64;

/// `train run`'s defaults for the 13B at 2048 tokens, `rows` sequences a GPU, world 4.
fn input(rows: usize, checkpointing: Checkpointing) -> Input {
    let shape = Shape::by_name("13B", 10_000, 2048).unwrap();
    Input {
        checkpointing,
        ..Input::train_defaults(shape, 4, rows)
    }
}

/// Full: each block keeps its input alone (n·d bf16 elements) until its backward, which
/// holds that block's activations, made again. Selective: each block keeps all but the
/// attention's probabilities (heads·t a token at 2048 tokens: no one-kernel attention),
/// which its backward makes again with their scores. Everything else is as without.
#[test]
fn each_mode_keeps_what_it_says() {
    let at = |m| plan(&input(8, m), Strategy::Fsdp);
    let (off, sel, full) = (
        at(Checkpointing::Off),
        at(Checkpointing::Selective),
        at(Checkpointing::Full),
    );
    for r in [&off, &sel, &full] {
        assert_eq!(r.at, Phase::LastBlock);
    }
    // Per block, bf16: x, h1, qkv, y, x2, h2 (8d), the SwiGLU's 3·d_ff, heads·t
    // probabilities a token.
    let (n, d, f, h, t, l) = (8 * 2048u64, 5120u64, 13824u64, 40u64, 2048u64, 40u64);
    let block = 2 * n * (8 * d + 3 * f + h * t);
    let (input, probs) = (2 * n * d, 2 * n * h * t);
    let act = |r: &memplan::Row| r.bytes.activations;
    assert_eq!(act(&off) - act(&full), (l - 1) * (block - input));
    // Selective: l blocks' probabilities not kept, the block run back makes them again
    // with their scores.
    assert_eq!(act(&off) + probs * 2, act(&sel) + l * probs);
    let rest = |b: Bytes| Bytes {
        activations: 0,
        ..b
    };
    assert_eq!(rest(off.bytes), rest(full.bytes));
    assert_eq!(rest(off.bytes), rest(sel.bytes));
    let free = (139.0 * GIB) as u64;
    assert!(
        off.peak() > free && sel.peak() > free && full.peak() < free,
        "{} {} {} GiB",
        off.peak() as f64 / GIB,
        sel.peak() as f64 / GIB,
        full.peak() as f64 / GIB
    );
    // Where the one-kernel attention runs (128 tokens), selective keeps what off does.
    let short = |m| {
        let shape = Shape::by_name("13B", 10_000, 128).unwrap();
        let i = Input {
            checkpointing: m,
            ..Input::train_defaults(shape, 4, 8)
        };
        plan(&i, Strategy::Fsdp).peak()
    };
    assert_eq!(short(Checkpointing::Off), short(Checkpointing::Selective));
}

/// A refusal names the cheaper mode that would make the run fit, and only where one does.
#[test]
fn a_refusal_names_the_checkpointing_that_would_fit() {
    let free = |gib: f64| ((gib * GIB) as u64, "free (test)");
    let s = (Strategy::Fsdp, "fsdp");
    let rows = |_| Some(4);
    // 4 sequences a GPU: selective fits 139 GiB.
    let e = check("13B", &input(4, Checkpointing::Off), s, free(139.0), &rows).unwrap_err();
    assert!(
        e.contains("With --activation-checkpointing selective"),
        "{e}"
    );
    let rows = |_| Some(8);
    // 8: only full does.
    let e = check("13B", &input(8, Checkpointing::Off), s, free(139.0), &rows).unwrap_err();
    assert!(e.contains("With --activation-checkpointing full"), "{e}");
    let e = check(
        "13B",
        &input(8, Checkpointing::Selective),
        s,
        free(139.0),
        &rows,
    )
    .unwrap_err();
    assert!(e.contains("With --activation-checkpointing full"), "{e}");
    assert!(check("13B", &input(8, Checkpointing::Full), s, free(139.0), &rows).is_ok());
    let e = check("13B", &input(8, Checkpointing::Off), s, free(40.0), &rows).unwrap_err();
    assert!(!e.contains("--activation-checkpointing"), "{e}");
}

use super::*;
use crate::report::{check, fitting};
use crate::shape::Shape;

const GIB: f64 = (1u64 << 30) as f64;

fn input(name: &str, world: usize, rows: usize, bf16: bool) -> Input {
    Input {
        shape: Shape::by_name(name, 10_000, 128).unwrap(),
        world,
        rows,
        accum: 1,
        bf16,
        clip: true,
        captured: false,
        sharded_masters: false,
        fsdp_gathers: (0, 1),
        fsdp_unit: None,
        // The peaks below were measured before the copy-engine reduce-scatters (call 166)
        // and DDP's split all-reduce (call 176).
        ce_slots: Some(false),
        ddp_split: Some(false),
        checkpointed: false,
    }
}

fn no_comm(b: Bytes) -> Bytes {
    Bytes { comm: 0, ..b }
}

#[test]
fn zero1_keeps_one_nth_of_ddps_optimizer_state() {
    for name in ["xl", "6.7B"] {
        for world in [2, 4, 8] {
            let i = input(name, world, 8, true);
            let (ddp, z) = (plan(&i, Strategy::Ddp), plan(&i, Strategy::Zero1));
            assert_eq!(
                z.bytes.optimizer * world as u64,
                ddp.bytes.optimizer,
                "{name} {world}"
            );
            assert_eq!(ddp.bytes.optimizer, 8 * i.shape.params());
            // Masters, copies and gradients stay whole (plus f32 masters of the norms' slices).
            assert!(z.bytes.masters >= ddp.bytes.masters);
            assert!(z.peak() < ddp.peak());
        }
    }
}

#[test]
fn at_world_1_every_strategy_is_single_up_to_communication_buffers() {
    for bf16 in [false, true] {
        let i = input("xl", 1, 8, bf16);
        let single = plan(&i, Strategy::Single);
        for s in [
            Strategy::Ddp,
            Strategy::Zero1,
            Strategy::Zero2,
            Strategy::Fsdp,
        ] {
            let r = plan(&i, s);
            assert_eq!(no_comm(r.bytes), no_comm(single.bytes), "{s:?} bf16 {bf16}");
            assert_eq!((r.at, r.bytes.comm), (single.at, 0), "{s:?}");
            // Captured too: zero2 and fsdp at world 1 peaked as single did (32.60 GiB at xl
            // bf16, call 137), not at their sharded plan's 29.46.
            let c = Input {
                captured: true,
                ..i.clone()
            };
            let (r, one) = (plan(&c, s), plan(&c, Strategy::Single));
            assert_eq!(
                no_comm(r.bytes),
                no_comm(one.bytes),
                "captured {s:?} bf16 {bf16}"
            );
            assert_eq!(r.at, one.at, "captured {s:?}");
        }
        // sharded at world 1 still copies every parameter into one flat f32 buffer for its
        // (identity) broadcast, and with clipping scales a f32 copy of every gradient.
        let mut off = i.clone();
        off.clip = false;
        let (r, one) = (plan(&off, Strategy::Sharded), plan(&off, Strategy::Single));
        if !bf16 {
            assert_eq!(r.bytes.comm, 4 * i.shape.params());
            assert!(r.peak() > one.peak());
        }
        let clipped = plan(&i, Strategy::Sharded);
        assert_eq!(clipped.at, Phase::Optimizer);
        assert!(clipped.bytes.grads >= 4 * i.shape.params());
    }
}

#[test]
fn large_models_do_not_fit_80_gib_under_ddp_and_the_refusal_names_what_would() {
    let i = input("6.7B", 4, 8, true);
    let free = 80u64 << 30;
    let ddp = plan(&i, Strategy::Ddp);
    assert!(ddp.peak() > free, "{}", ddp.peak() as f64 / GIB);
    // Train's global batch of 32 sequences, split over w ranks.
    let rows_at = |w: usize| (32 % w == 0).then(|| 32 / w);
    let e = check(
        "--model 6.7B",
        &i,
        (Strategy::Ddp, "bucketed:25"),
        (free, "free on GPU 0 (test)"),
        &rows_at,
    )
    .unwrap_err();
    assert!(
        e.starts_with("--model 6.7B: --strategy bucketed:25 at world 4"),
        "{e}"
    );
    assert!(
        e.contains("80.0 GiB") && e.contains("free on GPU 0 (test)"),
        "{e}"
    );
    assert!(e.contains("zero1 at world 2, 4, 8"), "{e}");
    assert!(e.contains("fsdp at world 2, 4, 8"), "{e}");
    let fits = fitting(&i, free, &rows_at);
    assert!(fits.iter().all(|(s, _)| s.built()));
    assert!(check("x", &i, (Strategy::Zero1, "zero1"), (free, "t"), &rows_at).is_ok());
    // Nothing fits a tiny GPU: the message says so and what to change.
    let e = check(
        "x",
        &i,
        (Strategy::Zero1, "zero1"),
        (1 << 30, "t"),
        &rows_at,
    )
    .unwrap_err();
    assert!(
        e.contains("no strategy fits") && e.contains("does not fit"),
        "{e}"
    );
    // 13B bf16 fits zero1 at world 8 on 80 GiB only without its activations: not at all;
    // fsdp fits.
    let big = input("13B", 8, 64, true);
    let e = check("x", &big, (Strategy::Zero1, "zero1"), (free, "t"), &|_| {
        Some(64)
    });
    let e = e.unwrap_err();
    assert!(
        e.contains("Would fit") && e.contains("fsdp at world"),
        "{e}"
    );
    let would = e.split("Would fit").nth(1).unwrap_or_default();
    assert!(!would.contains("zero1"), "{e}");
    // xl bf16 at 64 sequences a micro-batch on 24 GiB: smaller micro-batches would fit.
    let xl = input("xl", 8, 64, true);
    let e = check(
        "x",
        &xl,
        (Strategy::Zero1, "zero1"),
        (24 << 30, "t"),
        &|_| Some(64),
    );
    assert!(e.unwrap_err().contains("a larger --accum"));
}

#[test]
fn the_plan_is_within_10_percent_of_measured_peaks() {
    // bench single, batch 8 × 128 (pool high-water + graph memory): xl bf16 vocab 683,
    // docs/results/dist-x2/ (AdamW after 29.76 GiB, inside the backward 29.07); vocab
    // 10,000, train-speed-h100x1/call42-bench.jsonl (30.18, 29.46); xl fp32 on H200, call 43
    // (30.61 after, 29.18 inside).
    let cases = [
        (683, true, true, 29.76),
        (683, true, false, 29.07),
        (10_000, true, true, 30.18),
        (10_000, true, false, 29.46),
        (10_000, false, true, 30.61),
        (10_000, false, false, 29.18),
    ];
    for (vocab, bf16, clip, measured) in cases {
        let i = Input {
            shape: Shape::by_name("xl", vocab, 128).unwrap(),
            clip,
            ..input("xl", 1, 8, bf16)
        };
        let p = plan(&i, Strategy::Single).peak() as f64 / GIB;
        assert!(
            (p / measured - 1.0).abs() < 0.10,
            "vocab {vocab} bf16 {bf16} clip {clip}: plan {p:.2} GiB, measured {measured}"
        );
    }
}

#[test]
fn absurd_inputs_saturate_instead_of_panicking() {
    let mut i = input("13B", usize::MAX, usize::MAX, true);
    for s in Strategy::ALL {
        assert!(plan(&i, s).peak() > 1 << 40);
    }
    i.shape.heads = 0;
    i.world = 0;
    for s in Strategy::ALL {
        let _ = plan(&i, s);
        let _ = paper(&i, s);
    }
}

#[test]
fn train_strategy_names_map_to_plans() {
    assert_eq!(Strategy::of_train("bucketed:25"), Some(Strategy::Ddp));
    assert_eq!(Strategy::of_train("flat"), Some(Strategy::Ddp));
    assert_eq!(Strategy::of_train("zero1"), Some(Strategy::Zero1));
    assert_eq!(Strategy::of_train("zero2:100"), Some(Strategy::Zero2));
    assert_eq!(Strategy::of_train("zero3"), None);
    assert_eq!(Strategy::of_train("fsdp:100"), Some(Strategy::Fsdp));
    assert!(Strategy::ALL.iter().all(|s| s.built()));
}

/// The captured step's plan against train's peaks on nvidia-h200-x4 (calls 86-87, each
/// rank's "peak GPU memory", 8 × 128 tokens a GPU, bf16, clipping): within 5 %, ZeRO-2
/// as ZeRO-1 (its graph holds every gradient); the eager plan is 12-15 % below them.
#[test]
fn the_captured_plan_is_within_five_percent_of_the_measured_peaks() {
    let cases = [
        ("xl", 1, Strategy::Single, 32.60),
        ("xl", 4, Strategy::Ddp, 32.60),
        ("xl", 4, Strategy::Zero1, 21.60),
        ("6.7B", 4, Strategy::Zero1, 64.70),
    ];
    for (name, world, s, measured) in cases {
        let eager = input(name, world, 8, true);
        let captured = Input {
            captured: true,
            ..eager.clone()
        };
        let p = plan(&captured, s);
        let gib = p.peak() as f64 / GIB;
        assert!(
            (gib / measured - 1.0).abs() < 0.05 && p.at == Phase::Captured,
            "{name} {s:?} world {world}: plan {gib:.2} GiB at {:?}, measured {measured}",
            p.at
        );
        let e = plan(&eager, s).peak() as f64 / GIB;
        assert!(e < 0.96 * measured, "{name} {s:?}: eager plan {e:.2}");
    }
}

/// With sharded masters (train's default for zero1 and zero2 above one rank; fsdp always),
/// the peaks measured on nvidia-h200-x4, bf16, 8 × 128 tokens a GPU, clipping, captured
/// (calls 91 and 93; xl's fsdp at its default unit of 3 stages, calls 102-104): the plan
/// within 10 % (issue 50's bar) of each.
#[test]
fn sharded_masters_plan_within_ten_percent_of_the_measured_peaks() {
    let cases = [
        ("xl", Strategy::Zero1, 13.29),
        ("xl", Strategy::Zero2, 12.70),
        ("xl", Strategy::Fsdp, 9.46),
        ("6.7B", Strategy::Zero1, 43.22),
        ("6.7B", Strategy::Zero2, 35.63),
        ("6.7B", Strategy::Fsdp, 24.41),
        ("13B", Strategy::Fsdp, 47.55),
    ];
    for (name, s, measured) in cases {
        let sharded = Input {
            captured: true,
            sharded_masters: true,
            ..input(name, 4, 8, true)
        };
        let gib = plan(&sharded, s).peak() as f64 / GIB;
        assert!(
            (gib / measured - 1.0).abs() < 0.10,
            "{name} {s:?}: plan {gib:.2} GiB, measured {measured}"
        );
    }
    // ZeRO-1 with the copy-engine reduce-scatters' slots, the default at worlds 2 and 4:
    // xl at world 4, 16.04 GiB (call 166, nvidia-h200-x4; 13.29 without them).
    let ce = Input {
        captured: true,
        sharded_masters: true,
        ce_slots: None,
        ..input("xl", 4, 8, true)
    };
    let gib = plan(&ce, Strategy::Zero1).peak() as f64 / GIB;
    assert!(
        (gib / 16.04 - 1.0).abs() < 0.10,
        "xl zero1 with slots: {gib:.2} GiB"
    );
    // FSDP by (unit, gathers): two stages ahead (9.30) and kept after the forward
    // (12.70), call 93; the last 8, 16 and 24 stages kept (call 96), 24 kept and two
    // ahead (call 100), all in units of one stage; units of 2, 3 and 4 stages, with the
    // last 6, 12 or 24 kept, 24 and two units ahead (calls 101, 102 and 106).
    let fsdp = [
        (1, (0, 2), 9.30),
        (1, (usize::MAX, 1), 12.70),
        (1, (8, 1), 9.72),
        (1, (16, 1), 10.33),
        (1, (24, 1), 10.94),
        (1, (24, 2), 10.99),
        (2, (0, 1), 9.31),
        (3, (0, 1), 9.46),
        (4, (0, 1), 9.61),
        (2, (24, 1), 11.07),
        (3, (6, 1), 10.00),
        (3, (12, 1), 10.46),
        (3, (24, 1), 11.37),
        (3, (24, 2), 11.60),
        (2, (24, 2), 11.22),
    ];
    for (unit, gathers, measured) in fsdp {
        let fsdp = Input {
            captured: true,
            sharded_masters: true,
            fsdp_gathers: gathers,
            fsdp_unit: Some(unit),
            ..input("xl", 4, 8, true)
        };
        let gib = plan(&fsdp, Strategy::Fsdp).peak() as f64 / GIB;
        assert!(
            (gib / measured - 1.0).abs() < 0.10,
            "fsdp unit {unit}, {gathers:?}: plan {gib:.2} GiB, measured {measured}"
        );
    }
    let whole = Input {
        captured: true,
        ..input("xl", 4, 8, true)
    };
    let sharded = Input {
        sharded_masters: true,
        ..whole.clone()
    };
    let (p, q) = (
        plan(&sharded, Strategy::Zero1),
        plan(&whole, Strategy::Zero1),
    );
    assert!(q.bytes.masters > 3 * p.bytes.masters, "{q:?} {p:?}");
    assert_eq!(plan(&sharded, Strategy::Ddp), plan(&whole, Strategy::Ddp));
}

/// FSDP's default unit: three of xl's 82 MB blocks, one of 6.7B's and 13B's (0.4 and 0.6 GB).
#[test]
fn fsdp_default_unit_gathers_200_mb_or_more() {
    let unit = |name: &str| {
        let sh = Shape::by_name(name, 10_000, 128).unwrap();
        crate::fsdp_unit(2 * sh.block_params())
    };
    assert_eq!((unit("xl"), unit("6.7B"), unit("13B")), (3, 1, 1));
    assert_eq!((crate::fsdp_unit(0), crate::fsdp_unit(1)), (8, 8));
    assert_eq!(
        (crate::fsdp_unit(100_000_000), crate::fsdp_unit(99_999_999)),
        (2, 3)
    );
}

/// DDP's split all-reduce (the default at worlds 2 and 4) holds ZeRO-1's copy-engine slots
/// and gather buffers of its own (world 2: one, gathered during the backward): xl at world
/// 2, 38.10 GiB against 32.60 whole (call 183, nvidia-h200-x2; 34.44 with the slots alone,
/// call 176); at world 4, 39.02 GiB (call 179, nvidia-h200-x4).
#[test]
fn the_split_all_reduce_plans_its_slots_and_gather_buffers() {
    let ddp = |world, split| {
        let i = Input {
            captured: true,
            ce_slots: None,
            ddp_split: split,
            checkpointed: false,
            ..input("xl", world, 8, true)
        };
        plan(&i, Strategy::Ddp).peak() as f64 / GIB
    };
    let (split, whole) = (ddp(2, None), ddp(2, Some(false)));
    assert!(
        (split / 38.10 - 1.0).abs() < 0.05,
        "xl ddp split: {split:.2} GiB"
    );
    assert!(
        (whole / 32.60 - 1.0).abs() < 0.05,
        "xl ddp whole: {whole:.2} GiB"
    );
    let more = split - whole;
    assert!(
        (more / 5.50 - 1.0).abs() < 0.1,
        "split's slots and gather buffer: {more:.2} GiB"
    );
    let gib = ddp(4, None);
    assert!(
        (gib / 39.02 - 1.0).abs() < 0.05,
        "xl ddp split, world 4: {gib:.2} GiB"
    );
}

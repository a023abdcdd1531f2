//! The plan as a table (`cargo xtask plan --model …`) and as a refusal (`train`'s
//! pre-flight check): the chosen strategy's row against the memory free on the GPU, and
//! the built strategies and world sizes that would fit.

use crate::plan::{paper, plan, Input, Phase, Row, Strategy, WORLDS};

/// Bytes as GiB with one decimal.
pub fn gib(b: u64) -> String {
    format!("{:.1}", b as f64 / (1u64 << 30) as f64)
}

/// Every strategy's plan at `i.world` (single at world 1).
pub fn rows(i: &Input) -> Vec<Row> {
    Strategy::ALL.iter().map(|&s| plan(i, s)).collect()
}

/// The run `i` describes, in words.
pub fn describe(i: &Input) -> String {
    let s = &i.shape;
    format!(
        "{:.2} B parameters (d_model {}, {} layers, {} heads, d_ff {}, vocab {}), {}, {} \
         sequences of {} tokens a micro-batch on each GPU, accum {}, clipping {}",
        s.params() as f64 / 1e9,
        s.d_model,
        s.layers,
        s.heads,
        s.d_ff,
        s.vocab,
        if i.bf16 { "bf16" } else { "fp32" },
        i.rows,
        s.context,
        i.accum,
        if i.clip { "on" } else { "off" }
    )
}

/// The per-strategy table, each row against `free` bytes where given.
pub fn table(i: &Input, free: Option<u64>) -> String {
    let mut o = format!(
        "Memory plan per GPU (GiB): {}.\nThe plan's estimate of each strategy's peak and what \
         it holds then, by component; \"paper\": the ZeRO paper's figure (K = 12, no \
         activations), for comparison.\n\n",
        describe(i)
    );
    o += &format!(
        "{:<40} {:>5} {:>8} {:>7} {:>7} {:>9} {:>11} {:>6} {:>7} {:>7}  {:<23}{}\n",
        "strategy",
        "world",
        "masters",
        "copies",
        "grads",
        "optimizer",
        "activations",
        "comm",
        "peak",
        "paper",
        "peak at",
        if free.is_some() { "  fits" } else { "" }
    );
    for r in rows(i) {
        let b = r.bytes;
        let fits = match free {
            Some(f) if r.peak() <= f => "  yes",
            Some(_) => "  no",
            None => "",
        };
        o += &format!(
            "{:<40} {:>5} {:>8} {:>7} {:>7} {:>9} {:>11} {:>6} {:>7} {:>7}  {:<23}{fits}\n",
            r.strategy.label(),
            r.world,
            gib(b.masters),
            gib(b.copies),
            gib(b.grads),
            gib(b.optimizer),
            gib(b.activations),
            gib(b.comm),
            gib(r.peak()),
            gib(paper(i, r.strategy)),
            r.at.name(),
        );
    }
    if let Some(f) = free {
        o += &format!("\nAgainst {} GiB free per GPU.\n", gib(f));
    }
    o
}

/// The built strategies that fit `free` bytes at each of [`WORLDS`], with `rows_at(w)`
/// sequences a micro-batch at world w (`None`: the batch does not split over w ranks).
pub fn fitting(
    i: &Input,
    free: u64,
    rows_at: &dyn Fn(usize) -> Option<usize>,
) -> Vec<(Strategy, Vec<usize>)> {
    let mut out = Vec::new();
    for s in Strategy::ALL.into_iter().filter(|s| s.built()) {
        let worlds: Vec<usize> = WORLDS
            .into_iter()
            .filter(|&w| s != Strategy::Single || w == 1)
            .filter(|&w| {
                rows_at(w).is_some_and(|rows| {
                    let at = Input {
                        world: w,
                        rows,
                        ..i.clone()
                    };
                    plan(&at, s).peak() <= free
                })
            })
            .collect();
        if !worlds.is_empty() {
            out.push((s, worlds));
        }
    }
    out
}

/// "zero1 at world 4, 8; sharded at world 8", or, when none fits `free` bytes, whether
/// smaller micro-batches would help (some built strategy fits `i` at one sequence a
/// micro-batch) or the model's state alone is too large for every built strategy.
pub fn fitting_text(fits: &[(Strategy, Vec<usize>)], i: &Input, free: u64) -> String {
    if !fits.is_empty() {
        return fits
            .iter()
            .map(|(s, w)| format!("{} at world {}", s.label(), join(w)))
            .collect::<Vec<_>>()
            .join("; ");
    }
    let one = Input {
        rows: 1,
        accum: 1,
        ..i.clone()
    };
    let why = match fitting(&one, free, &|_| Some(1)).is_empty() {
        false => "fewer sequences a micro-batch (a larger --accum) would make room",
        true => "even at one sequence a micro-batch the model's state does not fit: more GPUs",
    };
    format!("no strategy fits at world {} ({why})", join(&WORLDS))
}

fn join(ws: &[usize]) -> String {
    ws.iter()
        .map(|w| w.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Refuses strategy `s` (spelled `chosen`) for `i` when its plan exceeds `free` bytes
/// (`source` names where that figure comes from); the message shows the plan's row and
/// names the built strategies and world sizes that would fit (`rows_at`: see
/// [`fitting`]).
pub fn check(
    flags: &str,
    i: &Input,
    (s, chosen): (Strategy, &str),
    (free, source): (u64, &str),
    rows_at: &dyn Fn(usize) -> Option<usize>,
) -> Result<(), String> {
    let r = plan(i, s);
    if r.peak() <= free {
        return Ok(());
    }
    let b = r.bytes;
    // Another way of running the step that would make room: " With FLAG (WHAT) it needs
    // about X GiB: it fits.", or nothing.
    let fits_with = |other: Input, flag: &str, what: &str| {
        let peak = plan(&other, s).peak();
        match peak <= free {
            true => format!(
                " With {flag} ({what}) it needs about {} GiB: it fits.",
                gib(peak)
            ),
            false => String::new(),
        }
    };
    // The step run eager, where the captured one alone does not fit (its graph holds the
    // activations and every gradient at once); then checkpointing, not yet asked for.
    let eager = match i.captured && r.at == Phase::Captured {
        true => fits_with(
            Input {
                captured: false,
                ..i.clone()
            },
            "--eager",
            "the step not captured as one CUDA graph, whose memory holds the activations and \
             every gradient at once",
        ),
        false => String::new(),
    };
    let ac = match i.checkpointed {
        false => fits_with(
            Input {
                checkpointed: true,
                ..i.clone()
            },
            "--activation-checkpointing",
            "each block's forward again before its backward",
        ),
        true => String::new(),
    };
    Err(format!(
        "{flags}: --strategy {chosen} at world {} needs about {} GiB per GPU ({} bytes; the \
         memory plan's estimate of the step's peak, at the {}: f32 masters {}, bf16 copies \
         {}, gradients {}, optimizer state {}, activations {}, communication buffers {} \
         GiB), but {} GiB ({free} bytes) is free ({source}).{eager}{ac} Would fit, on GPUs with as \
         much free, at the same global batch: {}. `cargo xtask plan --model SIZE --world N \
         --batch SEQUENCES [--bf16]` prints every strategy's plan",
        r.world,
        gib(r.peak()),
        r.peak(),
        r.at.name(),
        gib(b.masters),
        gib(b.copies),
        gib(b.grads),
        gib(b.optimizer),
        gib(b.activations),
        gib(b.comm),
        gib(free),
        fitting_text(&fitting(i, free, rows_at), i, free),
    ))
}

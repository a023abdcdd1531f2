//! The `train run` table's memory cells: each rank's peak beside the memory plan that
//! `train` checks a run against (`model::plan`).

use super::train_speed::TrainRecord;

/// The memory plan's peak for `r` (`model::plan`, as train's pre-flight check makes it),
/// GiB; `None` for a size or strategy it does not know.
fn planned_gib(r: &TrainRecord) -> Option<f64> {
    use model::plan::{plan, Input, Shape, Strategy};
    let shape = Shape::by_name(&r.size, r.vocab?, r.seq)?;
    // run.sh's train-speed runs take train's defaults (a captured step, ...).
    let i = Input {
        accum: r.accum,
        bf16: r.dtype == "bf16",
        ..Input::train_defaults(shape, r.world, r.batch)
    };
    let s = Strategy::of_train(&r.strategy)?;
    Some(plan(&i, s).peak() as f64 / (1u64 << 30) as f64)
}

/// "peak GiB (max over ranks) | plan GiB | peak ÷ plan" cells.
pub(super) fn cells(r: &TrainRecord) -> String {
    let peak = r.peak_gib.iter().copied().reduce(f64::max);
    let plan = planned_gib(r);
    let cell = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}"));
    let ratio = match (peak, plan) {
        (Some(p), Some(q)) => format!("{:.3}", p / q),
        _ => "-".into(),
    };
    let later = match r.peak_after_first_gib.iter().copied().reduce(f64::max) {
        Some(l) => format!(" ({l:.2} after step 1)"),
        None => String::new(),
    };
    format!("{}{later} | {} | {ratio}", cell(peak), cell(plan))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rank_s_peak_is_set_beside_the_memory_plan() {
        let mut r = TrainRecord::xl_single();
        r.peak_gib = vec![29.5, 30.1];
        let planned = planned_gib(&r).unwrap();
        assert!(
            planned > 25.0 && planned < 35.0,
            "xl bf16 single: {planned}"
        );
        let row = cells(&r);
        assert!(row.starts_with("30.10 | "), "{row}");
        assert!(row.ends_with(&format!("{:.3}", 30.1 / planned)), "{row}");
        r.peak_after_first_gib = vec![27.0, 27.5];
        assert!(cells(&r).starts_with("30.10 (27.50 after step 1) | "));
        r.peak_after_first_gib.clear();
        r.peak_gib.clear();
        assert!(cells(&r).starts_with("- | "));
        // zero1 at world 4 is planned as train plans it, with sharded masters and the
        // copy-engine reduce-scatters' slots: call 168 measured 16.04 GiB (13.29 without the
        // slots, call 137; whole masters would plan 22.12).
        let z = TrainRecord {
            strategy: "zero1".into(),
            world: 4,
            ..TrainRecord::xl_single()
        };
        let planned = planned_gib(&z).unwrap();
        assert!(
            (planned / 16.04 - 1.0).abs() < 0.05,
            "xl zero1 world 4: {planned}"
        );
    }
}

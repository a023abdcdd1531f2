//! The report's "Scaling laws" section: fits the three Chinchilla approaches of the
//! `scaling-laws` crate to an IsoFLOPs file (a library call), writes its SVG plots into
//! `out/scaling-laws/` and a table with bootstrap intervals plus generated sentences.

use anyhow::{Context, Result};
use scaling_laws::bootstrap::{BootstrapOptions, Interval, PredictionInterval};
use scaling_laws::data::load_runs;
use scaling_laws::pipeline::{analyze, Options};
use scaling_laws::plot::write_plots;
use scaling_laws::report::{build_report, Prediction, Report};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Bootstrap resamples in the report (the CLI's default is 1,000): enough for stable 95%
/// intervals on this file, and fast.
pub const RESAMPLES: usize = 200;

/// The default `--isoflops` path, relative to the workspace root.
pub const DEFAULT_ISOFLOPS: &str = "data/isoflops_curves.json";

/// `p` as given when it exists or is absolute; a relative path that does not exist from
/// the current directory is looked up from the workspace root this binary was built in.
pub fn resolve(p: &Path) -> PathBuf {
    if p.exists() || p.is_absolute() {
        return p.to_path_buf();
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let q = root.join(p);
    if q.exists() {
        q
    } else {
        p.to_path_buf()
    }
}

/// Appends the section to `md`; a missing or unreadable file gives a one-line note.
pub fn section(md: &mut String, isoflops: &Path, out: &Path) -> Result<()> {
    if !isoflops.exists() {
        writeln!(
            md,
            "_Scaling laws: skipped, `{}` not found._\n",
            isoflops.display()
        )?;
        return Ok(());
    }
    match fit_section(isoflops, out) {
        Ok(s) => md.push_str(&s),
        Err(e) => {
            eprintln!("bench report: scaling-law section skipped: {e:#}");
            writeln!(md, "_Scaling laws: skipped, {e:#}._\n")?;
        }
    }
    Ok(())
}

fn sci(x: f64) -> String {
    format!("{x:.3e}")
}

fn iv(i: Option<Interval>, sci_fmt: bool) -> String {
    match i {
        Some(i) if sci_fmt => format!(" [{}, {}]", sci(i.lo), sci(i.hi)),
        Some(i) => format!(" [{:.4}, {:.4}]", i.lo, i.hi),
        None => String::new(),
    }
}

/// Prediction cells "N [lo, hi] | D [lo, hi]" for every budget.
fn prediction_cells(preds: &[Prediction], ivs: Option<&Vec<PredictionInterval>>) -> String {
    let mut s = String::new();
    for (k, p) in preds.iter().enumerate() {
        let pi = ivs.and_then(|v| v.get(k));
        let _ = write!(
            s,
            " {}{} | {}{} |",
            sci(p.n_opt),
            iv(pi.map(|x| x.n_opt), true),
            sci(p.d_opt),
            iv(pi.map(|x| x.d_opt), true)
        );
    }
    s
}

fn fit_section(isoflops: &Path, out: &Path) -> Result<String> {
    let t0 = std::time::Instant::now();
    let runs = load_runs(isoflops).with_context(|| format!("loading {}", isoflops.display()))?;
    let opts = Options {
        bootstrap: BootstrapOptions {
            resamples: RESAMPLES,
            ..BootstrapOptions::default()
        },
        ..Options::default()
    };
    let an = analyze(&runs, &opts)?;
    let r = build_report(&an);
    let secs = t0.elapsed().as_secs_f64();
    let plots = write_plots(&an, &out.join("scaling-laws"))?;

    let mut md = String::from("## Scaling laws (Chinchilla IsoFLOPs fits)\n\n");
    let file = isoflops
        .file_name()
        .map_or_else(|| isoflops.to_string_lossy(), |f| f.to_string_lossy());
    writeln!(
        md,
        "`{file}`: {} runs over {} compute budgets, tokens D = C/(6N). Fitted by the \
         `scaling-laws` crate (approaches 1–3 of Hoffmann et al. 2022); 95% percentile \
         intervals from a stratified bootstrap of {RESAMPLES} resamples.\n",
        an.runs,
        an.budgets.len()
    )?;
    md.push_str("| approach | a (N_opt ∝ C^a) | b (D_opt ∝ C^b) |");
    for c in &an.computes {
        write!(md, " N_opt at {c:.0e} | D_opt at {c:.0e} |")?;
    }
    md.push_str("\n|---|---:|---:|");
    md.push_str(&"---:|---:|".repeat(an.computes.len()));
    md.push('\n');
    for (name, a) in [
        ("1: lowest-loss run per budget", &r.approach1),
        ("2: IsoFLOP parabola vertex", &r.approach2),
    ] {
        let i = a.intervals.as_ref();
        writeln!(
            md,
            "| {name} | {:.4}{} | {:.4}{} |{}",
            a.n_exponent,
            iv(i.map(|i| i.n_exponent), false),
            a.d_exponent,
            iv(i.map(|i| i.d_exponent), false),
            prediction_cells(&a.predictions, i.map(|i| &i.predictions))
        )?;
    }
    let a3 = &r.approach3;
    let i3 = a3.intervals.as_ref();
    let s = a3.law.alpha + a3.law.beta;
    writeln!(
        md,
        "| 3: parametric L(N, D) ¹ | {:.4} | {:.4} |{}",
        a3.law.beta / s,
        a3.law.alpha / s,
        prediction_cells(&a3.predictions, i3.map(|i| &i.predictions))
    )?;
    writeln!(
        md,
        "\n¹ L(N, D) = E + A/N^α + B/D^β with E = {:.4}{}, A = {:.2}, B = {:.2}, \
         α = {:.4}{}, β = {:.4}{}; a = β/(α+β), b = α/(α+β); RMSE(ln L) = {:.2e}.\n",
        a3.law.e,
        iv(i3.map(|i| i.e), false),
        a3.law.a,
        a3.law.b,
        a3.law.alpha,
        iv(i3.map(|i| i.alpha), false),
        a3.law.beta,
        iv(i3.map(|i| i.beta), false),
        a3.rmse_log_loss
    )?;
    for p in &plots {
        let name = p
            .file_name()
            .map_or(String::new(), |f| f.to_string_lossy().to_string());
        writeln!(
            md,
            "![{}](scaling-laws/{name})",
            name.trim_end_matches(".svg")
        )?;
    }
    md.push('\n');
    md.push_str(&sentences(&r, secs));
    md.push('\n');
    Ok(md)
}

/// Two or three sentences on what the numbers show.
fn sentences(r: &Report, secs: f64) -> String {
    let a3 = &r.approach3;
    let exps = [
        ("1", r.approach1.n_exponent),
        ("2", r.approach2.n_exponent),
        ("3", a3.law.beta / (a3.law.alpha + a3.law.beta)),
    ];
    let mut s = String::new();
    let agree: Vec<(usize, usize)> = (0..3)
        .flat_map(|i| (i + 1..3).map(move |j| (i, j)))
        .filter(|&(i, j)| (exps[i].1 - exps[j].1).abs() < 0.01)
        .collect();
    match agree.as_slice() {
        [] => s.push_str("The three approaches disagree on the exponent a by more than 0.01: "),
        [(0, 1), (0, 2), (1, 2)] => s.push_str("All three approaches agree within 0.01 on a: "),
        pairs => {
            let names: Vec<String> = pairs
                .iter()
                .map(|&(i, j)| format!("{} and {}", exps[i].0, exps[j].0))
                .collect();
            let _ = write!(
                s,
                "Approaches {} agree within 0.01 on a: ",
                names.join("; ")
            );
        }
    }
    let list: Vec<String> = exps.iter().map(|(n, a)| format!("{a:.3} ({n})")).collect();
    let _ = write!(s, "N_opt ∝ C^a with a = {}", list.join(", "));
    if let Some(i) = &r.approach1.intervals {
        let _ = write!(
            s,
            "; approach 1 can only pick one of the trained sizes per budget, its interval is \
             a in [{:.3}, {:.3}]",
            i.n_exponent.lo, i.n_exponent.hi
        );
    }
    s.push_str(". ");
    let last = |p: &[Prediction]| p.last().copied();
    if let (Some(p1), Some(p2), Some(p3)) = (
        last(&r.approach1.predictions),
        last(&r.approach2.predictions),
        last(&a3.predictions),
    ) {
        let _ = write!(
            s,
            "At C = {:.0e} FLOPs the predicted compute-optimal model has {:.2e} (approach 1), \
             {:.2e} (2) and {:.2e} (3) parameters; approach 3's {:.0} B parameters would see \
             {:.0} B tokens, {:.1} tokens per parameter. ",
            p3.compute,
            p1.n_opt,
            p2.n_opt,
            p3.n_opt,
            p3.n_opt / 1e9,
            p3.d_opt / 1e9,
            p3.d_opt / p3.n_opt
        );
    }
    if a3.rmse_log_loss < 1e-6 {
        let _ = write!(
            s,
            "The parametric law fits every run to RMSE(ln L) = {:.1e}: the runs lie on it \
             without noise, so approach 3's intervals collapse to a point. ",
            a3.rmse_log_loss
        );
    }
    let _ = writeln!(
        s,
        "The fit with {RESAMPLES} bootstrap resamples (fewer than the CLI's 1,000, for speed) \
         took {secs:.2} s."
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_has_scaling_section_and_plots() {
        let dir = std::env::temp_dir().join(format!("bench-scaling-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let results = dir.join("results.jsonl");
        std::fs::write(
            &results,
            r#"{"bench":"allreduce","backend":"cpu","world":2,"bytes":1048576,"iters":5,"time_us":100.0,"algbw_gbs":10.0,"busbw_gbs":10.0,"correct":true,"device":"cpu"}"#,
        )
        .unwrap();
        let iso = resolve(Path::new(DEFAULT_ISOFLOPS));
        assert!(iso.exists(), "{} missing", iso.display());
        let out = dir.join("report");
        super::super::write_report(&results, None, &iso, &out).unwrap();
        let md = std::fs::read_to_string(out.join("report.md")).unwrap();
        assert!(md.contains("## All-reduce"), "{md}");
        assert!(md.contains("## Scaling laws"), "{md}");
        assert!(md.contains("| 2: IsoFLOP parabola vertex | 0.51"), "{md}");
        assert!(md.contains("bootstrap of 200 resamples"), "{md}");
        for f in ["n_opt.svg", "d_opt.svg", "isoflop_profiles.svg"] {
            assert!(md.contains(&format!("(scaling-laws/{f})")), "{md}");
            let svg = std::fs::read_to_string(out.join("scaling-laws").join(f)).unwrap();
            assert!(svg.contains("<svg"), "{f}");
        }
        // An absent file: a one-line note, no failure.
        let out2 = dir.join("report2");
        super::super::write_report(&results, None, &dir.join("none.json"), &out2).unwrap();
        let md = std::fs::read_to_string(out2.join("report.md")).unwrap();
        assert!(md.contains("_Scaling laws: skipped, `"), "{md}");
        assert!(!out2.join("scaling-laws").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

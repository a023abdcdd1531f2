//! The report's "where the overlapped step loses its time" tables: every traced strategy
//! against the naive trace of the same size and dtype ([`crate::slowdown`]), from the
//! Chrome traces `bench ddp --trace-dir` wrote beside the results.

use crate::slowdown::{breakdown, load, BUSY};
use anyhow::Result;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// ("xl-fp32", the naive trace) for each naive trace in `dir`, sorted.
fn bases(files: &[PathBuf]) -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = files
        .iter()
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?;
            let key = name.strip_prefix("trace-")?.strip_suffix("-naive.json")?;
            Some((key.to_string(), p.clone()))
        })
        .collect();
    out.sort();
    out
}

/// A trace's strategy label from its file name ("bucketed-25-coalesced" → "bucketed 25
/// MB coalesced"), and a sort key that puts bucket sizes in numeric order.
fn label(rest: &str) -> (String, (u8, f64, String)) {
    let parts: Vec<&str> = rest.split('-').collect();
    match parts.as_slice() {
        ["bucketed", mb, tail @ ..] if mb.parse::<f64>().is_ok() => {
            let mb_v: f64 = mb.parse().unwrap_or(0.0);
            let t = tail.join(" ");
            let l = format!("bucketed {mb} MB{}", if t.is_empty() { "" } else { " " }) + &t;
            (l, (1, mb_v, t))
        }
        _ => (rest.replace('-', " "), (0, 0.0, rest.to_string())),
    }
}

/// Appends the section for the traces in `dir` (nothing when it has no naive trace).
pub fn section(md: &mut String, dir: &Path) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let bases = bases(&files);
    if bases.is_empty() {
        return Ok(());
    }
    writeln!(
        md,
        "## Where the overlapped DDP step loses its time (rank 0's traced step)\n\n\
         Each strategy's traced step against the naive one of the same model (whose backward \
         runs with no communication beside it), stage by stage: the backward stages during \
         which collectives ran for at least {:.0}% of the stage (busy) and the others (idle), \
         with their extra milliseconds; the forward with the last stage's backward; the wait \
         for gradients after the backward (negative: the collectives the naive step waits \
         for are hidden); the optimizer. `lost/comm` = busy stages' extra ÷ milliseconds of \
         collectives beside them. Busy stages slower and idle ones not: the collectives take \
         compute's resources, not its clock. One traced step each: read a row to ±1 ms.\n",
        BUSY * 100.0
    )?;
    for (key, base_path) in bases {
        let base = load(&base_path)?;
        let prefix = format!("trace-{key}-");
        let mut rows: Vec<((u8, f64, String), String, PathBuf)> = files
            .iter()
            .filter(|p| *p != &base_path)
            .filter_map(|p| {
                let name = p.file_name()?.to_str()?;
                let rest = name.strip_prefix(&prefix)?.strip_suffix(".json")?;
                let (l, k) = label(rest);
                Some((k, l, p.clone()))
            })
            .collect();
        rows.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal));
        writeln!(
            md,
            "### {} (naive step {:.1} ms)\n\n| strategy | step | busy stages | their extra | idle stages | their extra | forward + last | wait | optimizer | collectives beside | lost/comm |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            key.replace('-', " "),
            crate::slowdown::step_ms(&base)
        )?;
        for (_, l, p) in rows {
            let b = breakdown(&base, &load(&p)?).map_err(|e| {
                e.context(format!("{} against {}", p.display(), base_path.display()))
            })?;
            writeln!(
                md,
                "| {l} | {:.1} | {} | {:+.1} | {} | {:+.1} | {:+.1} | {:+.1} | {:+.1} | {:.1} | {:.2} |",
                b.step_ms,
                b.busy_stages,
                b.busy_extra_ms,
                b.idle_stages,
                b.idle_extra_ms,
                b.first_extra_ms,
                b.wait_extra_ms,
                b.optimizer_extra_ms,
                b.comm_beside_ms,
                b.lost_per_comm_ms()
            )?;
        }
        md.push('\n');
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slowdown::tests::span;
    use crate::trace::{chrome_trace, Lane};

    fn write(dir: &Path, name: &str, stage1_ms: f64, comm: Option<(f64, f64)>) {
        let mut s = vec![
            span("forward + backward stage 1", Lane::Compute, 0.0, 10.0),
            span("backward stage 0", Lane::Compute, 10.0, 10.0 + stage1_ms),
        ];
        if let Some((a, b)) = comm {
            s.push(span("all_reduce", Lane::Comm, a, b));
        }
        let v = chrome_trace(&s, 0, name);
        std::fs::write(dir.join(name), v.to_string()).unwrap();
    }

    #[test]
    fn strategies_are_compared_with_the_naive_trace_in_bucket_order() {
        let dir = std::env::temp_dir().join(format!("slowdown-report-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        write(&dir, "trace-xl-fp32-naive.json", 4.0, None);
        write(
            &dir,
            "trace-xl-fp32-bucketed-25.json",
            6.0,
            Some((10.0, 14.0)),
        );
        write(
            &dir,
            "trace-xl-fp32-bucketed-5.json",
            5.0,
            Some((10.0, 12.0)),
        );
        write(&dir, "trace-xl-fp32-overlap.json", 4.0, None);
        let mut md = String::new();
        section(&mut md, &dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(md.contains("### xl fp32 (naive step 14.0 ms)"), "{md}");
        let (a, b, c) = (
            md.find("| overlap | 14.0 | 0 | +0.0 | 1 | +0.0 |")
                .expect(&md),
            md.find("| bucketed 5 MB | 15.0 | 1 | +1.0 | 0 | +0.0 |")
                .expect(&md),
            md.find("| bucketed 25 MB | 16.0 | 1 | +2.0 |").expect(&md),
        );
        assert!(a < b && b < c, "5 MB before 25 MB: {md}");
        assert!(
            md.contains("| 2.0 | 0.50 |"),
            "5 MB: 1 ms lost over 2 ms beside: {md}"
        );
    }

    #[test]
    fn no_trace_directory_or_no_naive_trace_adds_nothing() {
        let mut md = String::new();
        section(&mut md, Path::new("/nonexistent/traces")).unwrap();
        assert!(md.is_empty());
        assert_eq!(label("bucketed-25-coalesced").0, "bucketed 25 MB coalesced");
        assert_eq!(label("overlap-coalesced").0, "overlap coalesced");
    }
}

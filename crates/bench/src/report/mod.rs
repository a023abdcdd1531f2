//! The report writer: reads the JSON lines of a run and writes `report.md` with a table,
//! a plot and a few generated sentences per section.

mod ddp;
mod plot;
mod scaling;
mod slowdown;
mod training;

pub use scaling::{resolve as resolve_isoflops, DEFAULT_ISOFLOPS};

use crate::allreduce::human_bytes;
use crate::records::{read, AllReduceRecord, TopologyRecord, TorchAllReduce, TorchStep};
use anyhow::Result;
use std::fmt::Write as _;
use std::path::Path;

/// Writes `out/report.md` and `out/allreduce-<backend>.svg` from `results` (and the
/// PyTorch anchor's lines in `torch`, when given and present), and the scaling-law section
/// fitted to `isoflops` (skipped with a note when that file is absent).
pub fn write_report(
    results: &Path,
    torch: Option<&Path>,
    isoflops: &Path,
    out: &Path,
) -> Result<()> {
    std::fs::create_dir_all(out)?;
    let torch_path = torch;
    let recs: Vec<AllReduceRecord> = read(results, Some("allreduce"))?;
    let topo: Option<TopologyRecord> = read(results, Some("topology"))?.into_iter().next();
    let torch: Vec<TorchAllReduce> = match torch.filter(|p| p.exists()) {
        Some(p) => read::<TorchAllReduce>(p, None)?
            .into_iter()
            .filter(|t| {
                t.mode == "allreduce" && t.transport.as_deref().unwrap_or("default") == "default"
            })
            .collect(),
        None => Vec::new(),
    };
    let mut md = String::from("# Benchmark report\n\n");
    if let Some(t) = &topo {
        writeln!(
            md,
            "Machine: {} × {}; GPU 0 has {} active NVLink links at {:.1} GB/s each.\n",
            t.gpus, t.gpu, t.nvlinks, t.link_gbs
        )?;
    }
    md += "## All-reduce (fp32, sum, in place)\n\n";
    let mut backends: Vec<String> = recs.iter().map(|r| r.backend.clone()).collect();
    backends.dedup();
    backends.sort();
    backends.dedup();
    for b in &backends {
        let mine: Vec<AllReduceRecord> = recs.iter().filter(|r| &r.backend == b).cloned().collect();
        section(&mut md, b, &mine, &torch, topo.as_ref(), out)?;
    }
    if recs.is_empty() {
        md += "No all-reduce results in this run.\n";
    }
    let mut ddp_recs: Vec<crate::ddp::DdpRecord> = read(results, Some("ddp"))?;
    for r in &mut ddp_recs {
        r.nccl_env = crate::records::retune(r.nccl_env.as_deref());
    }
    let torch_steps: Vec<TorchStep> = match torch_path.filter(|p| p.exists()) {
        Some(p) => read(p, None)?,
        None => Vec::new(),
    };
    let singles: Vec<crate::single::SingleRecord> = read(results, Some("single"))?;
    training::single(&mut md, &singles, &torch_steps, out)?;
    ddp::section(&mut md, &ddp_recs, &recs, &torch_steps, out)?;
    // The traces `bench ddp --trace-dir` wrote beside the results (run.sh, xtask bench).
    let traces = results.parent().unwrap_or(Path::new(".")).join("traces");
    slowdown::section(&mut md, &traces)?;
    let zero: Vec<crate::zero1::ZeroRecord> = read(results, Some("zero1"))?;
    training::zero(&mut md, &zero, &torch_steps, out)?;
    let prof: Vec<crate::profile::ProfileRecord> = read(results, Some("profile"))?;
    training::profile(&mut md, &prof)?;
    scaling::section(&mut md, isoflops, out)?;
    std::fs::write(out.join("report.md"), md)?;
    Ok(())
}

fn torch_match<'a>(torch: &'a [TorchAllReduce], r: &AllReduceRecord) -> Option<&'a TorchAllReduce> {
    let mib = r.bytes as f64 / (1u64 << 20) as f64;
    torch
        .iter()
        .find(|t| t.world == r.world && (t.mib - mib).abs() < 1e-6)
}

fn section(
    md: &mut String,
    backend: &str,
    recs: &[AllReduceRecord],
    torch: &[TorchAllReduce],
    topo: Option<&TopologyRecord>,
    out: &Path,
) -> Result<()> {
    let with_torch = backend == "nccl" && !torch.is_empty();
    writeln!(md, "### Backend `{backend}`\n")?;
    if with_torch {
        md.push_str("| ranks | size | time (µs) | algbw (GB/s) | busbw (GB/s) | PyTorch time (µs) | PyTorch busbw (GB/s) | busbw ratio | check |\n|---:|---:|---:|---:|---:|---:|---:|---:|:---:|\n");
    } else {
        md.push_str("| ranks | size | time (µs) | algbw (GB/s) | busbw (GB/s) | check |\n|---:|---:|---:|---:|---:|:---:|\n");
    }
    for r in recs {
        write!(
            md,
            "| {} | {} | {:.1} | {:.2} | {:.2} |",
            r.world,
            human_bytes(r.bytes),
            r.time_us,
            r.algbw_gbs,
            r.busbw_gbs
        )?;
        if with_torch {
            match torch_match(torch, r) {
                Some(t) => write!(
                    md,
                    " {:.1} | {:.2} | {:.3} |",
                    t.ms * 1e3,
                    t.busbw_gbs,
                    r.busbw_gbs / t.busbw_gbs
                )?,
                None => md.push_str(" – | – | – |"),
            }
        }
        writeln!(md, " {} |", if r.correct { "OK" } else { "FAIL" })?;
    }
    let svg = format!("allreduce-{backend}.svg");
    let extra: Vec<(String, Vec<(f64, f64)>)> = if with_torch {
        let mut worlds: Vec<usize> = torch.iter().map(|t| t.world).collect();
        worlds.dedup();
        worlds
            .into_iter()
            .map(|w| {
                let pts = torch
                    .iter()
                    .filter(|t| t.world == w)
                    .map(|t| (t.mib * (1u64 << 20) as f64, t.busbw_gbs))
                    .collect();
                (format!("PyTorch, {w} ranks"), pts)
            })
            .collect()
    } else {
        Vec::new()
    };
    let reference = topo
        .filter(|t| backend == "nccl" && t.peak_busbw_gbs > 0.0)
        .map(|t| {
            (
                format!(
                    "NVLink peak {:.0} GB/s ({} × {:.1})",
                    t.peak_busbw_gbs, t.nvlinks, t.link_gbs
                ),
                t.peak_busbw_gbs,
            )
        });
    plot::busbw_plot(
        &out.join(&svg),
        &format!("all-reduce bus bandwidth, backend {backend}"),
        recs,
        &extra,
        reference.clone(),
    )?;
    writeln!(md, "\n![busbw]({svg})\n")?;
    // Generated sentences: the largest message on the most ranks, and the 1 MiB latency.
    if let Some(big) = recs.iter().max_by_key(|r| (r.bytes, r.world)) {
        write!(
            md,
            "At {} on {} ranks the `{backend}` backend reaches {:.1} GB/s bus bandwidth",
            human_bytes(big.bytes),
            big.world,
            big.busbw_gbs
        )?;
        if let Some((_, peak)) = &reference {
            write!(
                md,
                " ({:.0}% of the NVLink peak)",
                100.0 * big.busbw_gbs / peak
            )?;
        }
        if let Some(t) = with_torch.then(|| torch_match(torch, big)).flatten() {
            write!(
                md,
                "; PyTorch in the same run reaches {:.1} GB/s (ratio {:.3})",
                t.busbw_gbs,
                big.busbw_gbs / t.busbw_gbs
            )?;
        }
        md.push_str(". ");
    }
    if let Some(small) = recs.iter().find(|r| r.bytes == 1 << 20 && r.world == 2) {
        write!(
            md,
            "A 1 MiB all-reduce on 2 ranks takes {:.1} µs",
            small.time_us
        )?;
        if let Some(t) = with_torch.then(|| torch_match(torch, small)).flatten() {
            write!(md, " against PyTorch's {:.1} µs", t.ms * 1e3)?;
        }
        md.push_str(". ");
    }
    let bad = recs.iter().filter(|r| !r.correct).count();
    writeln!(
        md,
        "{} of {} results were checked exact{}.\n",
        recs.len() - bad,
        recs.len(),
        if bad > 0 { " (see FAIL rows)" } else { "" }
    )?;
    Ok(())
}

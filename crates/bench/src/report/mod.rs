//! The report writer: reads the JSON lines of a run and writes `report.md` with a table,
//! a plot and a few generated sentences per section.

mod cpu;
mod ddp;
mod gpus;
mod input;
mod kernels;
mod parity;
mod plot;
mod scaling;
mod slowdown;
mod train_memory;
mod train_speed;
mod training;

pub use scaling::{resolve as resolve_isoflops, DEFAULT_ISOFLOPS};

use crate::allreduce::human_bytes;
use crate::records::{AllReduceRecord, TopologyRecord, TorchAllReduce, TorchStep};
use anyhow::Result;
use input::Lines;
use std::fmt::Write as _;
use std::path::Path;

/// Records of the results file that are valid but have no section in the report.
const NOT_REPORTED: &[&str] = &["profile-memory", "rmsnorm", "contention", "reduce-scatter"];
/// The most skipped lines the report lists (stderr gets them all).
const LISTED: usize = 50;

/// Writes `out/report.md` and `out/allreduce-<backend>.svg` from `results` (and the
/// PyTorch anchor's lines in `torch`, which must exist when given), and the scaling-law
/// section fitted to `isoflops` (skipped with a note when that file is absent). Returns
/// the input lines it skipped, as `file:line: why` (also listed at the end of the report).
pub fn write_report(
    results: &Path,
    torch: Option<&Path>,
    isoflops: &Path,
    out: &Path,
) -> Result<Vec<String>> {
    let mut res = Lines::load(results, "--results")?;
    let mut anchor = torch.map(|p| Lines::load(p, "--torch")).transpose()?;
    std::fs::create_dir_all(out)?;
    let recs: Vec<AllReduceRecord> = res.take("bench", &["allreduce"]);
    let topo = res
        .take::<TopologyRecord>("bench", &["topology"])
        .into_iter()
        .next();
    let (torch, torch_steps): (Vec<TorchAllReduce>, Vec<TorchStep>) = match &mut anchor {
        Some(a) => (a.take("mode", &["allreduce"]), a.take("mode", &[])),
        None => (Vec::new(), Vec::new()),
    };
    let (gloo, torch): (Vec<TorchAllReduce>, Vec<TorchAllReduce>) =
        torch.into_iter().partition(TorchAllReduce::is_gloo);
    let torch: Vec<TorchAllReduce> = torch
        .into_iter()
        .filter(|t| t.transport.as_deref().unwrap_or("default") == "default")
        .collect();
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
        md += "No all-reduce in this run: it needs at least 2 GPUs (on N ≥ 2 GPUs, `cargo xtask \
               bench --gpus N` or `run.sh full` measures it against PyTorch's).\n\n";
    }
    cpu::side_by_side(&mut md, &recs, &gloo)?;
    let mut ddp_recs: Vec<crate::ddp::DdpRecord> = res.take("bench", &["ddp"]);
    for r in &mut ddp_recs {
        r.nccl_env = crate::records::retune(r.nccl_env.as_deref());
    }
    let singles: Vec<crate::single::SingleRecord> = res.take("bench", &["single"]);
    training::single(&mut md, &singles, &torch_steps, out)?;
    let trains: Vec<train_speed::TrainRecord> = res.take("bench", &["train"]);
    train_speed::section(&mut md, &trains, &singles, &torch_steps, out)?;
    let gpu = topo.as_ref().map(|t| t.gpu.as_str());
    gpus::section(&mut md, &trains, &singles, &torch_steps, &recs, gpu, out)?;
    ddp::section(&mut md, &ddp_recs, &recs, &torch_steps, out)?;
    // The traces `bench ddp --trace-dir` wrote beside the results (run.sh, xtask bench).
    let traces = results.parent().unwrap_or(Path::new(".")).join("traces");
    slowdown::section(&mut md, &traces)?;
    let zero: Vec<crate::zero1::ZeroRecord> = res.take("bench", &["zero1"]);
    training::zero(&mut md, &zero, &torch_steps, out)?;
    let prof: Vec<crate::profile::ProfileRecord> = res.take("bench", &["profile"]);
    training::profile(&mut md, &prof)?;
    let kern: Vec<kernels::KernelRecord> = res.take("bench", &["kernels"]);
    kernels::section(&mut md, &kern, &singles)?;
    // `run.sh train-parity` writes parity/DTYPE/compare.json beside the results.
    parity::section(
        &mut md,
        &results.parent().unwrap_or(Path::new(".")).join("parity"),
        out,
    )?;
    scaling::section(&mut md, isoflops, out)?;
    let mut skipped = res.finish("bench", NOT_REPORTED);
    if let Some(a) = anchor {
        skipped.extend(a.finish("mode", &[]));
    }
    skipped_section(&mut md, &skipped)?;
    std::fs::write(out.join("report.md"), md)?;
    Ok(skipped)
}

/// The input lines left out of the report, file:line and why.
fn skipped_section(md: &mut String, skipped: &[String]) -> Result<()> {
    if skipped.is_empty() {
        return Ok(());
    }
    writeln!(
        md,
        "## Skipped input lines

{} input lines were not used:
",
        skipped.len()
    )?;
    for s in skipped.iter().take(LISTED) {
        writeln!(md, "- `{s}`")?;
    }
    if skipped.len() > LISTED {
        writeln!(md, "- … and {} more", skipped.len() - LISTED)?;
    }
    md.push('\n');
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
                    t.time_us(),
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
            write!(md, " against PyTorch's {:.1} µs", t.time_us())?;
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

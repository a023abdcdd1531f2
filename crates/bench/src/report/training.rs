//! The training sections of the report: the single-GPU step against PyTorch eager, ZeRO
//! memory and time against PyTorch's ZeroRedundancyOptimizer, and the per-component
//! profile (with its flame graph). Each: a table, a plot, and generated sentences.

use super::plot;
use crate::profile::ProfileRecord;
use crate::records::TorchStep;
use crate::single::{Precision, SingleRecord};
use crate::zero1::ZeroRecord;
use anyhow::Result;
use std::fmt::Write as _;
use std::path::Path;

/// GiB with two decimals, or MiB when below 1 GiB (the CPU's tiny model).
fn size(g: f64) -> String {
    if g < 1.0 {
        format!("{:.2} MiB", g * 1024.0)
    } else {
        format!("{g:.2} GiB")
    }
}

fn gib(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into())
}

/// Single-GPU step per size and dtype, with PyTorch eager's step where the anchor ran.
pub fn single(
    md: &mut String,
    recs: &[SingleRecord],
    torch: &[TorchStep],
    out: &Path,
) -> Result<()> {
    md.push_str("## Single-GPU training step\n\n");
    if recs.is_empty() {
        md.push_str("No single-GPU results in this run.\n\n");
        return Ok(());
    }
    let anchor = |r: &SingleRecord| {
        torch
            .iter()
            .find(|t| t.mode == "single" && t.size == r.size && t.dtype == r.dtype.name())
    };
    md.push_str("| size | dtype | fwd (ms) | bwd (ms) | AdamW (ms) | step (ms) | tokens/s | peak fwd (GiB) | peak step (GiB) | PyTorch step (ms) | ratio |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in recs {
        let t = anchor(r);
        writeln!(
            md,
            "| {} | {} | {:.2} | {:.2} | {:.2} | {:.2} ± {:.2} | {:.0} | {} | {} | {} | {} |",
            r.size,
            r.dtype.name(),
            r.fwd_ms.0,
            r.bwd_ms.0,
            r.opt_ms.0,
            r.step_ms.0,
            r.step_ms.1,
            r.tokens_per_s,
            gib(r.peak_fwd_gib),
            gib(r.peak_step_gib),
            t.map(|t| format!("{:.2}", t.step_ms))
                .unwrap_or_else(|| "-".into()),
            t.map(|t| format!("{:.2}", r.step_ms.0 / t.step_ms))
                .unwrap_or_else(|| "-".into()),
        )?;
    }
    let mut series: Vec<plot::Series> = Vec::new();
    for p in [Precision::Fp32, Precision::Bf16] {
        let ours: Vec<(f64, f64)> = recs
            .iter()
            .filter(|r| r.dtype == p)
            .map(|r| (r.params as f64, r.step_ms.0))
            .collect();
        let theirs: Vec<(f64, f64)> = recs
            .iter()
            .filter(|r| r.dtype == p)
            .filter_map(|r| anchor(r).map(|t| (r.params as f64, t.step_ms)))
            .collect();
        if !ours.is_empty() {
            series.push((format!("ours {}", p.name()), ours, false));
        }
        if !theirs.is_empty() {
            series.push((format!("PyTorch eager {}", p.name()), theirs, true));
        }
    }
    let svg = out.join("single-step.svg");
    plot::lines_log_x(
        &svg,
        "Training step against model size",
        ("parameters", "step (ms)"),
        &series,
    )?;
    md.push_str("\n![single-GPU step](single-step.svg)\n\n");
    let big = recs.iter().max_by_key(|r| r.params).expect("non-empty");
    write!(
        md,
        "The largest model here, {} in {}, takes {:.1} ms per step ({:.1} forward, {:.1} backward, {:.1} AdamW), {:.0} tokens/s",
        big.size, big.dtype.name(), big.step_ms.0, big.fwd_ms.0, big.bwd_ms.0, big.opt_ms.0, big.tokens_per_s
    )?;
    match anchor(big) {
        Some(t) => writeln!(
            md,
            "; PyTorch eager in the same run: {:.1} ms ({:.2}× ours/theirs), peak {} vs {:.2} GiB.",
            t.step_ms,
            big.step_ms.0 / t.step_ms,
            gib(big.peak_step_gib),
            t.peak_gib
        )?,
        None => writeln!(md, " (no PyTorch anchor in this run).")?,
    }
    writeln!(
        md,
        "Backward takes {:.1}× the forward there (2× is the FLOP ratio of a GEMM-bound step).\n",
        big.bwd_ms.0 / big.fwd_ms.0.max(1e-9)
    )?;
    Ok(())
}

/// ZeRO modes: memory at each point of a step and step time.
pub fn zero(md: &mut String, recs: &[ZeroRecord], torch: &[TorchStep], out: &Path) -> Result<()> {
    md.push_str("## Optimizer-state sharding and ZeRO-1\n\n");
    if recs.is_empty() {
        md.push_str("No ZeRO results in this run.\n\n");
        return Ok(());
    }
    md.push_str("| size | ranks | mode | bucket (MB) | step (ms) | comm alone (ms) | after init | before step | after step | peak (GiB) | params + grads + moments (GiB) |\n|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in recs {
        writeln!(
            md,
            "| {} | {} | {} | {} | {:.1} ± {:.1} | {:.1} | {} | {} | {} | {} | {:.2} |",
            r.size,
            r.world,
            r.mode,
            r.bucket_mb,
            r.step_ms,
            r.step_std_ms,
            r.comm_ms,
            gib(r.after_init_gib),
            gib(r.before_step_gib),
            gib(r.after_step_gib),
            gib(r.peak_gib),
            r.params_gib + r.grads_gib + r.state_gib
        )?;
    }
    for t in torch.iter().filter(|t| t.mode == "zero") {
        writeln!(
            md,
            "| {} | {} | PyTorch {} | | {:.1} | | | | | {:.2} | |",
            t.size,
            t.world.unwrap_or(0),
            t.opt.as_deref().unwrap_or("?"),
            t.step_ms,
            t.peak_gib
        )?;
    }
    let measured = recs.iter().any(|r| r.peak_gib.is_some());
    let items: Vec<(String, f64)> = recs
        .iter()
        .map(|r| {
            let v = if measured {
                r.peak_gib.unwrap_or(0.0)
            } else {
                r.params_gib + r.grads_gib + r.state_gib
            };
            (r.mode.clone(), v)
        })
        .collect();
    let what = if measured {
        "peak memory per GPU (GiB)"
    } else {
        "params + grads + moments per rank (GiB, analytic: no device memory on the CPU)"
    };
    plot::bars(&out.join("zero-memory.svg"), "ZeRO modes", what, &items)?;
    md.push_str("\n![ZeRO memory](zero-memory.svg)\n\n");
    let ddp = recs.iter().find(|r| r.mode == "ddp");
    let sharded = || recs.iter().filter(|r| r.mode != "ddp");
    let smallest = sharded().min_by(|a, b| a.state_gib.total_cmp(&b.state_gib));
    let fastest = sharded().min_by(|a, b| a.step_ms.total_cmp(&b.step_ms));
    if let (Some(d), Some(b), Some(f)) = (ddp, smallest, fastest) {
        writeln!(
            md,
            "Sharding over {} ranks cuts the AdamW state per rank from {} to {} ({}). The fastest sharded mode, {}, steps in {:.1} ms against DDP's {:.1} ms ({:.3}×){}.\n",
            d.world, size(d.state_gib), size(b.state_gib), b.mode, f.mode, f.step_ms, d.step_ms, f.step_ms / d.step_ms,
            match (f.peak_gib, d.peak_gib) {
                (Some(pf), Some(pd)) => format!(", at a peak of {pf:.2} GiB against {pd:.2}"),
                _ => String::new(),
            }
        )?;
    }
    Ok(())
}

/// The per-component profile: the largest components, and the flame graph.
pub fn profile(md: &mut String, recs: &[ProfileRecord]) -> Result<()> {
    md.push_str("## Profile of one step\n\n");
    if recs.is_empty() {
        md.push_str("No profile in this run.\n\n");
        return Ok(());
    }
    let mut runs: Vec<(String, String, String)> = recs
        .iter()
        .map(|r| (r.size.clone(), r.dtype.clone(), r.mode.clone()))
        .collect();
    runs.dedup();
    for (size, dtype, mode) in runs {
        let mut rs: Vec<&ProfileRecord> = recs
            .iter()
            .filter(|r| r.size == size && r.dtype == dtype && r.mode == mode)
            .collect();
        rs.sort_by(|a, b| b.total_ms.total_cmp(&a.total_ms));
        let total: f64 = rs.iter().map(|r| r.total_ms).sum();
        let gemm: f64 = rs.iter().filter(|r| r.matmul).map(|r| r.total_ms).sum();
        writeln!(md, "### {size} {dtype} {mode} ({total:.2} ms)\n")?;
        md.push_str(
            "| component | calls | total (ms) | share | GEMM |\n|---|---:|---:|---:|:-:|\n",
        );
        for r in rs.iter().take(10) {
            writeln!(
                md,
                "| `{}` | {} | {:.3} | {:.1}% | {} |",
                r.label,
                r.calls,
                r.total_ms,
                100.0 * r.share,
                if r.matmul { "✓" } else { "" }
            )?;
        }
        writeln!(
            md,
            "\n![flame graph](profile/flame-{size}-{dtype}-{mode}.svg)\n\nGEMM-bound components take {:.1}% of the {mode}; the largest component is `{}` ({:.1}%, {} calls).\n",
            100.0 * gemm / total.max(1e-12),
            rs[0].label,
            100.0 * rs[0].share,
            rs[0].calls
        )?;
    }
    Ok(())
}

//! The training sections of the report: the single-GPU step against the strongest PyTorch
//! and PyTorch eager, ZeRO memory and time against PyTorch's ZeroRedundancyOptimizer, and
//! the per-component profile (with its flame graph). Each: a table, a plot, sentences.

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
    x.map_or("-".into(), |v| format!("{v:.2}"))
}

/// PyTorch eager (torch_baseline.py: hand-written attention, unfused AdamW) for a record.
/// The anchors run the sizes' own vocabulary: a record with another has none.
fn eager<'a>(torch: &'a [TorchStep], r: &SingleRecord) -> Option<&'a TorchStep> {
    super::ddp::torch_for(torch, "single", &r.size, r.dtype.name(), r.tf32)
        .filter(|_| r.vocab == model::VOCAB)
}

/// The strongest PyTorch (torch_best.py) for a record: its fastest variant with the same
/// size, dtype and TF32 setting.
fn best<'a>(torch: &'a [TorchStep], r: &SingleRecord) -> Option<&'a TorchStep> {
    torch
        .iter()
        .filter(|t| {
            t.mode == "single-best"
                && t.size == r.size
                && t.dtype == r.dtype.name()
                && t.tf32 == r.tf32
                && r.vocab == model::VOCAB
        })
        .min_by(|a, b| a.step_ms.total_cmp(&b.step_ms))
}

fn cell(t: Option<&TorchStep>, f: impl Fn(&TorchStep) -> String) -> String {
    t.map(f).unwrap_or_else(|| "-".into())
}

/// Single-GPU step per size and dtype, against the strongest PyTorch (torch_best.py) and
/// PyTorch eager where the anchors ran in the same run.
pub fn single(
    md: &mut String,
    recs: &[SingleRecord],
    torch: &[TorchStep],
    out: &Path,
) -> Result<()> {
    md.push_str(
        "## Single-GPU training step

",
    );
    if recs.is_empty() {
        md.push_str(
            "No single-GPU results in this run.

",
        );
        return Ok(());
    }
    md.push_str("Ratios are ours ÷ theirs (below 1: we are faster). Rows marked CUDA graph replay the step as one graph: their fwd column holds the whole replay (forward, backward and AdamW since 2026-11-25 01:30 UTC; forward and backward before). PyTorch best: `torch_best.py`'s fastest variant (SDPA flash attention, fused AdamW, `torch.compile`, with CUDA graphs in `compile-ro`); PyTorch eager: `torch_baseline.py`.

");
    md.push_str("| size | math | fwd (ms) | bwd (ms) | AdamW (ms) | step (ms) | tokens/s | peak step (GiB) | PyTorch best (ms) | ÷ best | best: peak (GiB) | PyTorch eager (ms) | ÷ eager |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in recs {
        let (b, e) = (best(torch, r), eager(torch, r));
        writeln!(
            md,
            "| {} | {} | {:.2} | {:.2} | {:.2} | {:.2} ± {:.2} | {:.0} | {} | {} | {} | {} | {} | {} |",
            r.size,
            r.math()
                + if r.graph { ", CUDA graph" } else { "" }
                + r.adamw_place()
                + &super::train_speed::vocab_note(r),
            r.fwd_ms.0,
            r.bwd_ms.0,
            r.opt_ms.0,
            r.step_ms.0,
            r.step_ms.1,
            r.tokens_per_s,
            gib(r.peak_step_gib),
            cell(b, |t| format!(
                "{:.2} ({})",
                t.step_ms,
                t.variant.as_deref().unwrap_or("?")
            )),
            cell(b, |t| format!("{:.2}", r.step_ms.0 / t.step_ms)),
            cell(b, |t| format!("{:.2}", t.peak_gib)),
            cell(e, |t| format!("{:.2}", t.step_ms)),
            cell(e, |t| format!("{:.2}", r.step_ms.0 / t.step_ms)),
        )?;
    }
    let mut series: Vec<plot::Series> = Vec::new();
    for p in [Precision::Fp32, Precision::Bf16] {
        let of = |f: &dyn Fn(&SingleRecord) -> Option<f64>| -> Vec<(f64, f64)> {
            recs.iter()
                .filter(|r| r.dtype == p && !r.tf32)
                .filter_map(|r| f(r).map(|y| (r.params as f64, y)))
                .collect()
        };
        for (name, pts, dashed) in [
            ("ours", of(&|r| Some(r.step_ms.0)), false),
            (
                "PyTorch best",
                of(&|r| best(torch, r).map(|t| t.step_ms)),
                true,
            ),
            (
                "PyTorch eager",
                of(&|r| eager(torch, r).map(|t| t.step_ms)),
                true,
            ),
        ] {
            if !pts.is_empty() {
                series.push((format!("{name} {}", p.name()), pts, dashed));
            }
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
    // The largest model's step without clipping (a clipped row, the step `train` runs, has
    // its own section).
    let unclipped: Vec<&SingleRecord> = recs.iter().filter(|r| r.norm.is_none()).collect();
    let pool = if unclipped.is_empty() {
        recs.iter().collect()
    } else {
        unclipped
    };
    let most = pool.iter().map(|r| r.params).max().unwrap_or(0);
    // bf16 where measured; of repeated runs the last (not the fastest).
    let big = pool
        .iter()
        .filter(|r| r.params == most)
        .rev()
        .min_by_key(|r| r.dtype == Precision::Fp32)
        .copied()
        .expect("non-empty");
    let (f, b, o) = (big.fwd_ms.0, big.bwd_ms.0, big.opt_ms.0);
    let parts = match big.graph {
        true => "one CUDA graph".to_string(),
        false => format!("{f:.1} forward, {b:.1} backward, {o:.1} AdamW"),
    };
    write!(
        md,
        "The largest model here, {} in {}, takes {:.1} ms per step ({parts}), {:.0} tokens/s",
        big.size,
        big.math(),
        big.step_ms.0,
        big.tokens_per_s
    )?;
    match (best(torch, big), eager(torch, big)) {
        (None, None) => writeln!(md, " (no PyTorch anchor in this run).")?,
        (b, e) => {
            if let Some(t) = b {
                write!(
                    md,
                    "; the strongest PyTorch in the same run ({}): {:.1} ms ({:.2}× ours/theirs), peak {} vs {:.2} GiB",
                    t.variant.as_deref().unwrap_or("?"),
                    t.step_ms,
                    big.step_ms.0 / t.step_ms,
                    gib(big.peak_step_gib),
                    t.peak_gib
                )?;
            }
            if let Some(t) = e {
                write!(
                    md,
                    "; PyTorch eager: {:.1} ms ({:.2}×)",
                    t.step_ms,
                    big.step_ms.0 / t.step_ms
                )?;
            }
            writeln!(md, ".")?;
        }
    }
    if !big.graph {
        writeln!(
            md,
            "Backward takes {:.1}× the forward there (2× is the FLOP ratio of a GEMM-bound step).",
            big.bwd_ms.0 / big.fwd_ms.0.max(1e-9)
        )?;
    }
    md.push('\n');
    Ok(())
}

/// ZeRO modes: memory at each point of a step and step time.
pub fn zero(md: &mut String, recs: &[ZeroRecord], torch: &[TorchStep], out: &Path) -> Result<()> {
    md.push_str("## Optimizer-state sharding and ZeRO-1\n\n");
    if recs.is_empty() {
        md.push_str("No ZeRO results in this run.\n\n");
        return Ok(());
    }
    md.push_str("Every mode runs the step `train` runs (`step::TrainStep`, no clipping): `zero1` is ZeRO-1 with one bucket reduce-scattered after the backward, `zero1-overlap` through DDP's buckets during it, `zero1-ahead` with its all-gathers overlapping the next forward, `zero2` as `zero1-ahead` with each bucket's gradients freed once scattered. Memory is read in eager steps; step time is of the step captured as one CUDA graph where the record says `graph`. The own 1-GPU step is `bench single`'s (`step::Local`, one CUDA graph, AdamW where it runs fastest) on the same model, timed in the same run.\n\n");
    md.push_str("| size | dtype | ranks | mode | bucket (MB) | step (ms) | own 1-GPU (ms) | ÷ 1-GPU | comm alone (ms) | after init | before step | after step | peak (GiB) | f32 params + grads + moments (GiB) |\n|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in recs {
        let one = |f: fn(f64, f64) -> String| r.single_ms.map_or("-".into(), |s| f(r.step_ms, s));
        writeln!(
            md,
            "| {} | {} | {} | {} | {} | {:.1} ± {:.1} | {} | {} | {:.1} | {} | {} | {} | {} | {:.2} |",
            r.size,
            r.dtype.name(),
            r.world,
            r.mode,
            r.bucket_mb,
            r.step_ms,
            r.step_std_ms,
            one(|_, s| format!("{s:.1}")),
            one(|m, s| format!("{:.3}", m / s)),
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
            "| {} | {} | {} | PyTorch {} | | {:.1} | | | | | | | {:.2} | |",
            t.size,
            t.dtype,
            t.world.unwrap_or(0),
            t.opt.as_deref().unwrap_or("?"),
            t.step_ms,
            t.peak_gib
        )?;
    }
    let measured = recs.iter().any(|r| r.peak_gib.is_some());
    let mixed = recs.iter().any(|r| r.dtype != recs[0].dtype);
    let items: Vec<(String, f64)> = recs
        .iter()
        .map(|r| {
            let v = if measured {
                r.peak_gib.unwrap_or(0.0)
            } else {
                r.params_gib + r.grads_gib + r.state_gib
            };
            let label = match mixed {
                true => format!("{} {}", r.mode, r.dtype.name()),
                false => r.mode.clone(),
            };
            (label, v)
        })
        .collect();
    let what = if measured {
        "peak memory per GPU (GiB)"
    } else {
        "params + grads + moments per rank (GiB, analytic: no device memory on the CPU)"
    };
    plot::bars(&out.join("zero-memory.svg"), "ZeRO modes", what, &items)?;
    md.push_str("\n![ZeRO memory](zero-memory.svg)\n\n");
    let mut dtypes = Vec::new();
    for r in recs {
        if !dtypes.contains(&r.dtype) {
            dtypes.push(r.dtype);
        }
    }
    for dt in dtypes {
        let of = || recs.iter().filter(move |r| r.dtype == dt);
        let ddp = of().find(|r| r.mode == "ddp");
        let sharded = || of().filter(|r| r.mode != "ddp");
        let smallest = sharded().min_by(|a, b| a.state_gib.total_cmp(&b.state_gib));
        let fastest = sharded().min_by(|a, b| a.step_ms.total_cmp(&b.step_ms));
        let (Some(d), Some(b), Some(f)) = (ddp, smallest, fastest) else {
            continue;
        };
        writeln!(
            md,
            "{}: sharding over {} ranks cuts the AdamW state per rank from {} to {} ({}). The fastest sharded mode, {}, steps in {:.1} ms against DDP's {:.1} ms ({:.3}×){}.\n",
            dt.name(), d.world, size(d.state_gib), size(b.state_gib), b.mode, f.mode, f.step_ms, d.step_ms, f.step_ms / d.step_ms,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(json: &str) -> SingleRecord {
        let base = r#"{"bench":"single","size":"xl","mode":"step","params":2000000000,"batch":8,"seq":128,"steps":10,"fwd_ms":[20.0,0.1],"bwd_ms":[40.0,0.1],"opt_ms":[6.0,0.1],"step_ms":[66.0,0.5],"tokens_per_s":15500.0,"mfu":null,"peak_fwd_gib":10.0,"peak_step_gib":29.6,"loss_first":9.2,"loss_last":9.1,"#;
        serde_json::from_str(&format!("{base}{json}}}")).unwrap()
    }

    fn torch(json: &str) -> TorchStep {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn the_single_table_shows_the_strongest_pytorch_and_eager_side_by_side() {
        let recs = [
            rec(r#""dtype":"bf16""#),
            rec(r#""dtype":"fp32","tf32":true"#),
        ];
        let t = [
            torch(
                r#"{"mode":"single","size":"xl","dtype":"bf16","step_ms":246.8,"peak_GiB":32.2}"#,
            ),
            torch(
                r#"{"mode":"single-best","variant":"compile","size":"xl","dtype":"bf16","step_ms":75.1,"peak_GiB":30.5}"#,
            ),
            torch(
                r#"{"mode":"single-best","variant":"compile-ro","size":"xl","dtype":"bf16","step_ms":51.1,"peak_GiB":30.5}"#,
            ),
            // TF32 off: not the anchor of a TF32 row.
            torch(
                r#"{"mode":"single-best","variant":"compile-ro","size":"xl","dtype":"fp32","step_ms":323.5,"peak_GiB":30.5}"#,
            ),
            torch(
                r#"{"mode":"single-best","variant":"compile-ro","size":"xl","dtype":"fp32","tf32":true,"step_ms":81.7,"peak_GiB":30.5}"#,
            ),
        ];
        let dir = std::env::temp_dir().join(format!("bench-single-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut md = String::new();
        single(&mut md, &recs, &t, &dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        // bf16: the fastest variant (compile-ro) and eager, each with its ratio.
        assert!(md.contains("| xl | bf16 |"), "{md}");
        assert!(md.contains("51.10 (compile-ro) | 1.29 |"), "{md}");
        assert!(md.contains("| 246.80 | 0.27 |"), "{md}");
        // fp32 with TF32: only the TF32 anchor, and no eager TF32 anchor.
        assert!(md.contains("| xl | fp32 tf32 |"), "{md}");
        assert!(md.contains("81.70 (compile-ro) | 0.81 |"), "{md}");
        assert!(!md.contains("323.50"), "{md}");
    }
}

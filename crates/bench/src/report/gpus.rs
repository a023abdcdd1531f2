//! The report's multi-GPU section: `train run`'s throughput per GPU against the number of
//! GPUs, each strategy beside the PyTorch trainer (DDP and FSDP2, its fastest variant) at
//! the same world size and rows a GPU (`gpus-SIZE-DTYPE-bROWS.svg`), and each strategy's
//! step projected to 8, 16 and 64 GPUs (`memplan::time`) beside what was measured.

use super::plot;
use super::train_speed::{bench_single, median, trainer_lines, TrainRecord};
use crate::records::{AllReduceRecord, TorchStep};
use crate::single::SingleRecord;
use anyhow::Result;
use model::plan::time::{self, Collectives, Rates};
use std::fmt::Write as _;
use std::path::Path;

/// Tokens a second a GPU of a step of `ms` over `rows` of `seq` tokens a GPU.
fn per_gpu(rows: usize, seq: usize, ms: f64) -> f64 {
    (rows * seq) as f64 / ms * 1e3
}

/// "ddp" or "fsdp2" (one GPU's line, `single`, starts both).
fn parallel(t: &TorchStep) -> &str {
    t.parallel.as_deref().unwrap_or("ddp")
}

/// The rates a projection takes: the measured ones of the run's GPU (`gpu`, the topology
/// record's: H100 or H200; H100's for another or none), with the bus bandwidth of this
/// run's largest all-reduce at its largest world size where it has one.
fn rates(allreduce: &[AllReduceRecord], gpu: Option<&str>) -> (Rates, String) {
    let (mut r, which) = match gpu.and_then(|g| Rates::for_gpu(g).map(|r| (r, g))) {
        Some((r, g)) => (
            r,
            format!("the compute and AdamW rates measured on the {g}"),
        ),
        None => (
            Rates::h100(),
            format!(
                "the compute and AdamW rates measured on an H100 ({} measured here)",
                gpu.unwrap_or("no GPU named")
            ),
        ),
    };
    let big = allreduce
        .iter()
        .filter(|a| a.backend == "nccl" && a.correct)
        .max_by_key(|a| (a.world, a.bytes));
    let from = match big {
        Some(a) => {
            r.link_bps = a.busbw_gbs * 1e9;
            format!(
                "bus bandwidth {:.1} GB/s (this run's {} MiB all-reduce on {} GPUs)",
                a.busbw_gbs,
                a.bytes >> 20,
                a.world
            )
        }
        None => format!(
            "bus bandwidth {:.1} GB/s (the default: no all-reduce in this run)",
            r.link_bps / 1e9
        ),
    };
    (r, format!("{from}; {which}"))
}

pub fn section(
    md: &mut String,
    trains: &[TrainRecord],
    singles: &[SingleRecord],
    torch: &[TorchStep],
    allreduce: &[AllReduceRecord],
    gpu: Option<&str>,
    out: &Path,
) -> Result<()> {
    let mut groups: Vec<(&str, &str, usize)> = trains
        .iter()
        .filter(|r| r.world > 1 && r.accum == 1)
        .map(|r| (r.size.as_str(), r.dtype.as_str(), r.batch))
        .collect();
    groups.sort();
    groups.dedup();
    if groups.is_empty() {
        return Ok(());
    }
    let (rates, rates_from) = rates(allreduce, gpu);
    *md += "## Scaling with GPUs\n\n\
            Each GPU keeps its rows (weak scaling): a step at world N trains N times the \
            tokens of one GPU's. × one GPU is the step against `bench single --clip 1` at \
            the same rows (the same work on one GPU, without a communicator); below 1, \
            each GPU steps faster than one GPU alone. The PyTorch trainer's lines are \
            `torch_train_best.py` under torchrun, DDP or FSDP2, each variant that ran.\n\n";
    for (size, dtype, batch) in groups {
        let ours: Vec<&TrainRecord> = trains
            .iter()
            .filter(|r| (r.size.as_str(), r.dtype.as_str(), r.batch) == (size, dtype, batch))
            .filter(|r| r.accum == 1)
            .collect();
        let seq = ours[0].seq;
        let one = bench_single(singles, ours[0], true).map(median);
        writeln!(
            md,
            "### {size} {dtype}, {batch} × {seq} tokens a GPU\n\n\
             | who | world | step ms | tokens/s a GPU | × one GPU |\n|---|---:|---:|---:|---:|"
        )?;
        if let Some(o) = one {
            writeln!(
                md,
                "| `bench single --clip 1` | 1 | {o:.2} | {:.0} | 1.000 |",
                per_gpu(batch, seq, o)
            )?;
        }
        let mut series: Vec<plot::Series> = Vec::new();
        let mut names: Vec<&str> = ours.iter().map(|r| r.strategy.as_str()).collect();
        names.sort();
        names.dedup();
        for name in &names {
            let mut pts = Vec::new();
            let mut rs: Vec<&&TrainRecord> = ours.iter().filter(|r| r.strategy == *name).collect();
            rs.sort_by_key(|r| r.world);
            for r in rs {
                let x = one.map_or("-".into(), |o| format!("{:.3}", r.step_ms / o));
                let tps = per_gpu(batch, seq, r.step_ms);
                writeln!(
                    md,
                    "| `train run --strategy {name}` | {} | {:.2} | {tps:.0} | {x} |",
                    r.world, r.step_ms
                )?;
                pts.push((r.world as f64, tps / 1e3));
            }
            series.push((format!("ours, {name}"), pts, false));
        }
        // ours: one micro-batch (the groups' records), so are these lines.
        let lines: Vec<&TorchStep> = trainer_lines(torch, ours[0]).collect();
        let torch_one = lines
            .iter()
            .filter(|t| t.world.unwrap_or(1) == 1)
            .map(|t| t.step_ms)
            .reduce(f64::min);
        for par in ["ddp", "fsdp2"] {
            let mut best: Vec<(usize, f64)> = Vec::new();
            for t in lines.iter().filter(|t| {
                let p = parallel(t);
                p == par || (p == "single" && t.world.unwrap_or(1) == 1)
            }) {
                let w = t.world.unwrap_or(1);
                let v = t.variant.as_deref().unwrap_or("-");
                let x = torch_one.map_or("-".into(), |o| format!("{:.3}", t.step_ms / o));
                if parallel(t) == par {
                    writeln!(
                        md,
                        "| PyTorch {par} {v} | {w} | {:.2} | {:.0} | {x} (its own one GPU) |",
                        t.step_ms,
                        per_gpu(batch, seq, t.step_ms)
                    )?;
                }
                match best.iter_mut().find(|b| b.0 == w) {
                    Some(b) => b.1 = b.1.min(t.step_ms),
                    None => best.push((w, t.step_ms)),
                }
            }
            best.sort_by_key(|b| b.0);
            if best.iter().any(|b| b.0 > 1) {
                let pts = best
                    .iter()
                    .map(|&(w, ms)| (w as f64, per_gpu(batch, seq, ms) / 1e3));
                series.push((
                    format!("PyTorch {par}, fastest variant"),
                    pts.collect(),
                    false,
                ));
            }
        }
        if let Some(t) = lines.iter().find(|t| parallel(t) == "single") {
            writeln!(
                md,
                "| PyTorch one GPU {} | 1 | {:.2} | {:.0} | 1.000 (its own one GPU) |",
                t.variant.as_deref().unwrap_or("-"),
                t.step_ms,
                per_gpu(batch, seq, t.step_ms)
            )?;
        }
        md.push('\n');
        let svg = format!("gpus-{size}-{dtype}-b{batch}.svg");
        plot::lines_log_x(
            &out.join(&svg),
            &format!("{size} {dtype}, {batch} x {seq} tokens a GPU"),
            ("GPUs", "thousand tokens/s a GPU"),
            &series,
        )?;
        writeln!(md, "![tokens a second a GPU against GPUs]({svg})\n")?;
        memory(md, &ours, &lines, out, (size, dtype, batch))?;
        projection(md, &rates, &rates_from, &ours, one, (size, batch * seq))?;
    }
    Ok(())
}

/// Peak GPU memory per GPU (the largest rank's) of each strategy and world size, and of
/// the PyTorch trainer's lines: a bar each, `memory-SIZE-DTYPE-bROWS.svg`.
fn memory(
    md: &mut String,
    ours: &[&TrainRecord],
    torch: &[&TorchStep],
    out: &Path,
    (size, dtype, batch): (&str, &str, usize),
) -> Result<()> {
    let mut items: Vec<(String, f64)> = Vec::new();
    for r in ours {
        if let Some(p) = r.peak_gib.iter().copied().reduce(f64::max) {
            items.push((format!("{} w{}", r.strategy, r.world), p));
        }
    }
    for t in torch {
        let w = t.world.unwrap_or(1);
        items.push((format!("PyTorch {} w{w}", parallel(t)), t.peak_gib));
    }
    if items.is_empty() {
        return Ok(());
    }
    let svg = format!("memory-{size}-{dtype}-b{batch}.svg");
    plot::bars(
        &out.join(&svg),
        &format!("peak GPU memory a GPU, {size} {dtype}, {batch} rows a GPU"),
        "GiB",
        &items,
    )?;
    writeln!(
        md,
        "Peak memory a GPU: ours is the largest rank's (tensors and captured graphs, NCCL's \
         buffers aside; the `train run` table sets it beside the plan), PyTorch's its \
         `torch.cuda.max_memory_allocated`.\n\n![peak GPU memory]({svg})\n"
    )?;
    Ok(())
}

/// Each strategy's step on paper beside its measured ratio to one GPU, and the paper
/// table to 64 GPUs.
fn projection(
    md: &mut String,
    rates: &Rates,
    rates_from: &str,
    ours: &[&TrainRecord],
    one: Option<f64>,
    (size, tokens): (&str, usize),
) -> Result<()> {
    let Some(shape) = model::plan::Shape::by_name(size, ours[0].vocab.unwrap_or(683), ours[0].seq)
    else {
        return Ok(());
    };
    writeln!(
        md,
        "On paper (`memplan::time`, as `cargo xtask plan --model {size} --project` prints it; \
         {rates_from}; only the ratios to one GPU are compared): **a projection, not a \
         measurement.**\n\n\
         | strategy | world | measured × one GPU | projected × one GPU |\n|---|---:|---:|---:|"
    )?;
    let single = rates.project(&shape, tokens, Collectives::Single, 1).step;
    for r in ours.iter().filter(|r| r.world > 1) {
        let Some(sync) = Collectives::of_train(&r.strategy) else {
            continue;
        };
        let p = rates.project(&shape, tokens, sync, r.world).step / single;
        let m = one.map_or("-".into(), |o| format!("{:.3}", r.step_ms / o));
        writeln!(md, "| {} | {} | {m} | {p:.3} |", r.strategy, r.world)?;
    }
    writeln!(md, "\n```\n{}```\n", time::table(rates, &shape, tokens))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(strategy: &str, world: usize, step_ms: f64) -> TrainRecord {
        serde_json::from_str(&format!(
            r#"{{"size":"xl","dtype":"bf16","strategy":"{strategy}","world":{world},"batch":8,"seq":128,"step_ms":{step_ms},"vocab":683}}"#
        ))
        .unwrap()
    }

    fn torch(world: usize, parallel: &str, variant: &str, global: usize, ms: f64) -> TorchStep {
        serde_json::from_str(&format!(
            r#"{{"mode":"train-best","world":{world},"parallel":"{parallel}","variant":"{variant}","global_batch":{global},"size":"xl","dtype":"bf16","step_ms":{ms},"peak_GiB":30.0}}"#
        ))
        .unwrap()
    }

    #[test]
    fn each_world_is_set_beside_one_gpu_the_pytorch_trainer_and_the_projection() {
        let clipped: SingleRecord = serde_json::from_str(
            r#"{"bench":"single","size":"xl","dtype":"bf16","mode":"step","params":1,"vocab":683,"batch":8,"seq":128,"steps":35,"fwd_ms":[40.0,0.5],"bwd_ms":[0.0,0.0],"opt_ms":[0.0,0.0],"step_ms":[40.0,0.5],"tokens_per_s":1.0,"mfu":null,"peak_fwd_gib":null,"peak_step_gib":null,"loss_first":1.0,"loss_last":1.0,"graph":true,"adamw":"after","norm":"after"}"#,
        )
        .unwrap();
        let trains = [rec("zero1", 1, 40.4), rec("zero1", 4, 36.0)];
        let torch = [
            torch(1, "single", "compile-ro", 8, 60.0),
            torch(4, "ddp", "compile-ro", 32, 130.0),
            torch(4, "fsdp2", "compile-blocks", 32, 290.0),
            // 32 rows a GPU: not this group's.
            torch(4, "ddp", "compile-ro", 128, 170.0),
        ];
        let dir = tempfile::tempdir().unwrap();
        let run = |gpu| {
            let mut md = String::new();
            let one = std::slice::from_ref(&clipped);
            section(&mut md, &trains, one, &torch, &[], gpu, dir.path()).unwrap();
            md
        };
        let md = run(None);
        // 8 x 128 tokens in 36 ms: 28444 a second a GPU; 36 / 40 of one GPU's step.
        assert!(
            md.contains("| `train run --strategy zero1` | 4 | 36.00 | 28444 | 0.900 |"),
            "{md}"
        );
        assert!(
            md.contains("| PyTorch fsdp2 compile-blocks | 4 | 290.00 |"),
            "{md}"
        );
        assert!(!md.contains("170.00"), "{md}");
        assert!(md.contains("| zero1 | 4 | 0.900 | "), "{md}");
        assert!(md.contains("world 64"), "{md}");
        assert!(dir.path().join("gpus-xl-bf16-b8.svg").exists());
        // No peaks in these records: PyTorch's bars alone.
        assert!(dir.path().join("memory-xl-bf16-b8.svg").exists());
        // One GPU only: no section.
        let mut md = String::new();
        section(&mut md, &trains[..1], &[], &[], &[], None, dir.path()).unwrap();
        assert!(md.is_empty());
        // The run's GPU picks the rates: an H200's AdamW is a smaller share of its step,
        // so ZeRO-1 projects a larger ratio there.
        let projected = |gpu| {
            let md = run(gpu);
            let row = md
                .lines()
                .find(|l| l.starts_with("| zero1 | 4 | 0.900 | "))
                .unwrap();
            let p: f64 = row
                .trim_end_matches(" |")
                .rsplit("| ")
                .next()
                .unwrap()
                .parse()
                .unwrap();
            (md, p)
        };
        let (h200, on_h200) = projected(Some("NVIDIA H200"));
        let (h100, on_h100) = projected(None);
        assert!(h200.contains("measured on the NVIDIA H200"), "{h200}");
        assert!(
            h100.contains("measured on an H100 (no GPU named measured here)"),
            "{h100}"
        );
        assert!(on_h200 > on_h100 + 0.03, "{on_h200} {on_h100}");
    }
}

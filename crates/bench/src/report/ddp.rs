//! The DDP section: per model size and precision, every strategy's step, compute,
//! communication and exposed communication time against this GPU alone and PyTorch DDP
//! (same run); the bucket sweep plotted; and the seeds' overhead model
//! T(s_b) = (s + s_b)/w + s·o/s_b, with w and o fitted to the all-reduce sweep, whose
//! optimum s_b* = √(s·o·w) is set beside the measured best bucket.

use super::plot;
use crate::ddp::DdpRecord;
use crate::records::{AllReduceRecord, TorchStep};
use crate::telemetry::cell;
use anyhow::Result;
use std::fmt::Write as _;
use std::path::Path;

/// Least squares t = o + bytes / w over the all-reduce sweep of `world` ranks: (w bytes/s, o s).
pub fn fit_overhead(recs: &[AllReduceRecord], world: usize) -> Option<(f64, f64)> {
    let pts: Vec<(f64, f64)> = recs
        .iter()
        .filter(|r| r.world == world && r.backend == "nccl")
        .map(|r| (r.bytes as f64, r.time_us * 1e-6))
        .collect();
    if pts.len() < 2 {
        return None;
    }
    let n = pts.len() as f64;
    let (sx, sy) = pts.iter().fold((0.0, 0.0), |a, p| (a.0 + p.0, a.1 + p.1));
    let (mx, my) = (sx / n, sy / n);
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let slope = sxy / sxx;
    let o = my - slope * mx;
    (slope > 0.0).then_some((1.0 / slope, o.max(0.0)))
}

/// PyTorch eager's plain record (torch_baseline.py: no compile, unfused AdamW, default
/// transport) of `mode` for a size, dtype and TF32 setting.
pub(super) fn torch_for<'a>(
    torch: &'a [TorchStep],
    mode: &str,
    size: &str,
    dtype: &str,
    tf32: bool,
) -> Option<&'a TorchStep> {
    torch.iter().find(|t| {
        t.mode == mode
            && t.size == size
            && t.dtype == dtype
            && t.tf32 == tf32
            && !t.compile
            && !t.fused
            && t.opt.as_deref().unwrap_or("adamw") == "adamw"
            && t.transport.as_deref().unwrap_or("default") == "default"
    })
}

fn label(r: &DdpRecord) -> String {
    let base = match r.bucket_mb {
        Some(b) => format!("bucketed {b} MB"),
        None => r.strategy.clone(),
    };
    let base = match r.sm_carveout {
        0 => base,
        c => format!("{base}, GEMMs leave {c} SMs"),
    };
    let base = match r.coalesce {
        true => format!("{base}, coalesced"),
        false => base,
    };
    match &r.nccl_env {
        Some(e) => format!("{base}, {e}"),
        None => base,
    }
}

/// Gradients sent in a narrower dtype than the model computes in (a compression hook:
/// not the same training, so never the "best strategy").
fn compressed(r: &DdpRecord) -> bool {
    r.dtype.name() == "fp32" && r.grad_dtype != "fp32"
}

pub fn section(
    md: &mut String,
    recs: &[DdpRecord],
    allreduce: &[AllReduceRecord],
    torch: &[TorchStep],
    out: &Path,
) -> Result<()> {
    md.push_str("## Data-parallel training (DDP)\n\n");
    if recs.is_empty() {
        md.push_str("No DDP results in this run.\n\n");
        return Ok(());
    }
    md.push_str("Per rank: batch of sequences as below, context 128. `1-GPU` = this GPU alone (plain backward + AdamW); `compute` = the step with no communication (older records: the staged backward with AdamW after it; since session 10 DDP runs AdamW where one GPU does, and `compute` is the 1-GPU step); `comm` = the strategy's collectives alone; `exposed` = step − compute; `hidden` = 1 − exposed / comm; `overlap` = compute time during communication ÷ communication time on one traced step (CUDA events on both streams; Holistic Trace Analysis' ratio; Chrome traces beside this report). Times in ms, slowest rank, CUDA events.\n\n");
    let mut keys: Vec<(usize, String, String, String)> = recs
        .iter()
        .map(|r| {
            (
                r.world,
                r.size.clone(),
                r.dtype.name().to_string(),
                r.backend.clone(),
            )
        })
        .collect();
    keys.sort();
    keys.dedup();
    for (world, size, dtype, backend) in keys {
        let rows: Vec<&DdpRecord> = recs
            .iter()
            .filter(|r| {
                r.world == world
                    && r.size == size
                    && r.dtype.name() == dtype
                    && r.backend == backend
            })
            .collect();
        let first = rows[0];
        writeln!(
            md,
            "### {size} {dtype}, {world} ranks ({backend}), batch {} per rank\n",
            first.batch_per_rank
        )?;
        md.push_str("| strategy | grads | collectives | step | ± | compute | comm | exposed | hidden | step / own 1-GPU | peak GiB | overlap |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for r in &rows {
            let hidden = if r.comm_ms > 0.0 {
                (1.0 - r.exposed_ms / r.comm_ms).clamp(0.0, 1.0) * 100.0
            } else {
                0.0
            };
            writeln!(
                md,
                "| {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.0}% | {:.3} | {} | {} |",
                label(r),
                r.grad_dtype,
                r.collectives,
                r.step_ms,
                r.step_std_ms,
                r.compute_ms,
                r.comm_ms,
                r.exposed_ms,
                hidden,
                r.step_ms / r.single_ms,
                r.peak_gib
                    .map(|g| format!("{g:.1}"))
                    .unwrap_or_else(|| "-".into()),
                r.overlap_ratio
                    .map(|o| format!("{o:.2}"))
                    .unwrap_or_else(|| "-".into())
            )?;
        }
        let best = rows
            .iter()
            .filter(|r| !compressed(r))
            .min_by(|a, b| a.step_ms.total_cmp(&b.step_ms))
            .unwrap_or(&rows[0]);
        let naive = rows.iter().find(|r| r.strategy == "naive");
        let cut = (first.compute_ms / first.single_ms - 1.0) * 100.0;
        writeln!(
            md,
            "\nOwn 1-GPU step {:.1} ms{}. Best strategy: **{}** at {:.1} ms, {:.3}× the own 1-GPU step{}.",
            first.single_ms,
            // Records since session 10 time the compute as the 1-GPU step itself.
            match (first.compute_ms == first.single_ms, cut.abs() < 0.05) {
                (true, _) => String::new(),
                (false, true) => format!(", staged compute {:.1} ms (the stage cut costs nothing measurable)", first.compute_ms),
                (false, false) => format!(", staged compute {:.1} ms (the stage cut costs {cut:+.1}%)", first.compute_ms),
            },
            label(best),
            best.step_ms,
            best.step_ms / first.single_ms,
            naive.map(|n| format!("; naive exposes {:.1} of its {:.1} ms of communication", n.exposed_ms, n.comm_ms)).unwrap_or_default()
        )?;
        if best.gpu.is_some() || best.single_gpu.is_some() {
            writeln!(
                md,
                "Rank 0's GPU (NVML; SM clock, mean power, share of samples capped by the power limit) during the best strategy's steps: {}; during the own 1-GPU steps: {}.",
                cell(best.gpu.as_ref()),
                cell(best.single_gpu.as_ref())
            )?;
        }
        let tdd = torch_for(torch, "ddp", &size, &dtype, false).filter(|t| t.world == Some(world));
        if let Some(t) = tdd {
            let ts = torch_for(torch, "single", &size, &dtype, false);
            writeln!(
                md,
                "PyTorch DDP (eager, 25 MB buckets, same run): {:.1} ms, peak {:.1} GiB{}; ours/PyTorch = {:.3} (our best's peak {} GiB).",
                t.step_ms,
                t.peak_gib,
                ts.map(|s| format!(
                    ", its 1-GPU step {:.1} ms (ratio {:.3})",
                    s.step_ms,
                    t.step_ms / s.step_ms
                ))
                .unwrap_or_default(),
                best.step_ms / t.step_ms,
                best.peak_gib.map(|g| format!("{g:.1}")).unwrap_or_else(|| "-".into())
            )?;
        }
        let buckets: Vec<&&DdpRecord> = rows
            .iter()
            .filter(|r| {
                r.bucket_mb.is_some()
                    && r.sm_carveout == 0
                    && !r.coalesce
                    && r.nccl_env.is_none()
                    && !compressed(r)
            })
            .collect();
        if buckets.len() >= 2 {
            let s = rows
                .iter()
                .find(|r| r.strategy == "flat")
                .map(|r| r.comm_bytes as f64)
                .unwrap_or_else(|| {
                    crate::ddp::config(&size)
                        .map(|c| c.param_count() as f64 * 4.0)
                        .unwrap_or(0.0)
                });
            let bbest = buckets
                .iter()
                .min_by(|a, b| a.step_ms.total_cmp(&b.step_ms))
                .expect("buckets");
            let mb = 1024.0 * 1024.0;
            let mut series = vec![
                (
                    "exposed comm (measured)".to_string(),
                    buckets
                        .iter()
                        .map(|r| (r.bucket_mb.unwrap(), r.exposed_ms))
                        .collect::<Vec<_>>(),
                    false,
                ),
                (
                    "comm alone (measured)".to_string(),
                    buckets
                        .iter()
                        .map(|r| (r.bucket_mb.unwrap(), r.comm_ms))
                        .collect(),
                    false,
                ),
            ];
            if let Some((w, o)) = fit_overhead(allreduce, world) {
                let star = (s * o * w).sqrt();
                let model = |sb: f64| ((s + sb) / w + s * o / sb) * 1e3;
                let lo = buckets
                    .iter()
                    .map(|r| r.bucket_mb.unwrap())
                    .fold(f64::MAX, f64::min);
                let hi = buckets
                    .iter()
                    .map(|r| r.bucket_mb.unwrap())
                    .fold(0.0, f64::max);
                series.push((
                    "model T(s_b)".to_string(),
                    (0..40)
                        .map(|k| lo * (hi / lo).powf(k as f64 / 39.0))
                        .map(|x| (x, model(x * mb)))
                        .collect(),
                    true,
                ));
                writeln!(
                    md,
                    "Overhead model, fitted to this run's all-reduce sweep ({world} ranks): w = {:.1} GB/s, o = {:.1} µs; s = {:.2} GB of gradients → s_b* = √(s·o·w) = **{:.1} MB** (T = {:.1} ms); measured best bucket: **{} MB** ({:.1} ms step, {:.1} ms exposed).",
                    w / 1e9, o * 1e6, s / 1e9, star / mb, model(star), bbest.bucket_mb.unwrap(), bbest.step_ms, bbest.exposed_ms
                )?;
            }
            let name = format!("ddp-buckets-{size}-{dtype}-w{world}.svg");
            plot::lines_log_x(
                &out.join(&name),
                &format!("DDP bucket sweep, {size} {dtype}, {world} ranks"),
                ("bucket size (MB, log scale)", "time (ms)"),
                &series,
            )?;
            writeln!(md, "\n![bucket sweep]({name})")?;
        }
        md.push('\n');
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::single::Precision;
    use crate::telemetry::GpuTelemetry;

    fn rec(carveout: usize, grads: &str, step_ms: f64) -> DdpRecord {
        DdpRecord {
            bench: "ddp".into(),
            backend: "nccl".into(),
            world: 2,
            size: "xl".into(),
            dtype: Precision::Fp32,
            strategy: "bucketed".into(),
            bucket_mb: Some(1.0),
            grad_dtype: grads.into(),
            batch_per_rank: 8,
            steps: 5,
            collectives: 339,
            comm_bytes: 1,
            single_ms: 280.0,
            compute_ms: 280.0,
            step_ms,
            step_std_ms: 1.0,
            comm_ms: 30.0,
            exposed_ms: step_ms - 280.0,
            peak_gib: None,
            loss_last: 9.0,
            overlap_ratio: None,
            traced_step_ms: None,
            sm_carveout: carveout,
            coalesce: false,
            launches: None,
            host_ms: None,
            nccl_env: None,
            gpu: None,
            single_gpu: None,
            graph: None,
            graph_fallback: None,
            adamw: None,
        }
    }

    #[test]
    fn best_strategy_may_carve_out_sms_but_never_compresses_fp32_gradients() {
        let recs = [
            rec(0, "fp32", 300.0),
            rec(16, "fp32", 290.0),
            rec(0, "bf16", 250.0),
        ];
        let mut md = String::new();
        section(&mut md, &recs, &[], &[], &std::env::temp_dir()).unwrap();
        assert!(
            md.contains("Best strategy: **bucketed 1 MB, GEMMs leave 16 SMs** at 290.0 ms"),
            "{md}"
        );
        assert!(
            md.contains("| bucketed 1 MB | bf16 |"),
            "the compressed row is listed: {md}"
        );
        assert!(!md.contains("Rank 0's GPU"), "no telemetry, no line: {md}");
    }

    #[test]
    fn the_best_strategy_names_its_clocks_and_power_next_to_the_1_gpu_steps() {
        let t = |mhz: f64, w: f64, cap: f64| GpuTelemetry {
            samples: 100,
            sm_mhz: mhz,
            sm_mhz_min: mhz,
            sm_mhz_max: Some(1980.0),
            power_w: w,
            power_w_max: w,
            power_limit_w: Some(700.0),
            power_capped: cap,
            thermal: 0.0,
            temp_c_max: 60.0,
        };
        let mut best = rec(0, "fp32", 290.0);
        best.gpu = Some(t(1850.0, 699.0, 0.4));
        best.single_gpu = Some(t(1980.0, 640.0, 0.0));
        let mut md = String::new();
        section(
            &mut md,
            &[rec(0, "fp32", 300.0), best],
            &[],
            &[],
            &std::env::temp_dir(),
        )
        .unwrap();
        assert!(
            md.contains("during the best strategy's steps: 1850 MHz 699 W cap 40%; during the own 1-GPU steps: 1980 MHz 640 W cap 0%."),
            "{md}"
        );
    }
}

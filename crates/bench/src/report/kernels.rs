//! The per-kernel section: where one replayed training step's time goes, kernel by
//! kernel (`run.sh kernels`: Nsight Compute over the last replay of `bench single`), with
//! each memory-bound kernel's DRAM rate against the copy ceiling and the GEMMs' combined
//! rate against the dense bf16 peak.

use crate::single::SingleRecord;
use anyhow::Result;
use serde::Deserialize;
use std::fmt::Write as _;

/// nvidia-h200's ceilings: dense bf16 tensor-core peak, and the device-to-device copy
/// rate measured there (bytes read plus written).
const PEAK_TFLOPS_BF16: f64 = 989.0;
const COPY_GBPS: f64 = 4300.0;
/// Kernels shown per step; the rest are summed in one row.
const SHOWN: usize = 25;

/// One line of `scripts/gpu/ncu_kernels.py`: a kernel name's calls in one replay (or the
/// `(all)` line with the totals).
#[derive(Debug, Clone, Deserialize)]
pub struct KernelRecord {
    pub size: String,
    pub dtype: String,
    pub batch: usize,
    pub seq: usize,
    #[serde(default)]
    pub tf32: bool,
    pub graph_kernels: usize,
    pub kernels_ms: f64,
    pub gemm_ms: f64,
    pub kernel: String,
    pub calls: usize,
    pub ms: f64,
    #[serde(default)]
    pub read_gb: f64,
    #[serde(default)]
    pub write_gb: f64,
    #[serde(default)]
    pub gemm: bool,
}

/// Appends the section (nothing when there are no kernel lines). The step time shown is
/// the matching graph-mode `bench single` record's (under Nsight Compute every kernel runs
/// alone, so the profiled run's own step time means nothing).
pub fn section(md: &mut String, recs: &[KernelRecord], singles: &[SingleRecord]) -> Result<()> {
    if recs.is_empty() {
        return Ok(());
    }
    md.push_str("## Where the step's time goes, kernel by kernel\n\n");
    let mut steps: Vec<(&str, &str, usize, bool)> = recs
        .iter()
        .map(|r| (r.size.as_str(), r.dtype.as_str(), r.batch, r.tf32))
        .collect();
    steps.dedup();
    for (size, dtype, batch, tf32) in steps {
        let mine: Vec<&KernelRecord> = recs
            .iter()
            .filter(|r| {
                (r.size.as_str(), r.dtype.as_str(), r.batch, r.tf32) == (size, dtype, batch, tf32)
            })
            .collect();
        let step = singles.iter().find(|s| {
            s.graph
                && s.size == size
                && s.dtype.name() == dtype
                && s.batch == batch
                && s.tf32 == tf32
        });
        table(md, &mine, step.map(|s| s.step_ms.0))?;
    }
    Ok(())
}

fn table(md: &mut String, recs: &[&KernelRecord], step_ms: Option<f64>) -> Result<()> {
    let Some(first) = recs.first() else {
        return Ok(());
    };
    let kernels: Vec<&&KernelRecord> = recs.iter().filter(|r| r.kernel != "(all)").collect();
    let tf = model::LmConfig::by_name(&first.size)
        .ok()
        .map(|cfg| crate::single::step_flops(&cfg, first.batch, first.seq) / 1e12);
    writeln!(
        md,
        "{} {}{}, batch {} × {}: one replay of the whole step runs {} kernels, {:.2} ms of \
         kernel time measured one kernel at a time (Nsight Compute, clocks unlocked){}.\n",
        first.size,
        first.dtype,
        if first.tf32 { " (TF32)" } else { "" },
        first.batch,
        first.seq,
        first.graph_kernels,
        first.kernels_ms,
        match step_ms {
            Some(ms) => format!("; the step replayed normally took {ms:.2} ms in this run"),
            None => String::new(),
        }
    )?;
    if let Some(tf) = tf.filter(|_| first.gemm_ms > 0.0) {
        let rate = tf / (first.gemm_ms * 1e-3);
        writeln!(
            md,
            "GEMMs: {:.2} ms for {tf:.2} TFLOP (the step's matmul FLOPs), {rate:.0} TFLOP/s, \
             {:.0} % of the {PEAK_TFLOPS_BF16:.0} TFLOP/s dense bf16 peak. Other kernels: \
             {:.2} ms, rated below against the {:.1} TB/s copy ceiling.\n",
            first.gemm_ms,
            100.0 * rate / PEAK_TFLOPS_BF16,
            first.kernels_ms - first.gemm_ms,
            COPY_GBPS / 1e3
        )?;
    }
    md.push_str("| kernel | calls | time (ms) | share | DRAM (GB) | GB/s | of ceiling |\n");
    md.push_str("|---|---:|---:|---:|---:|---:|---:|\n");
    for r in kernels.iter().take(SHOWN) {
        let gb = r.read_gb + r.write_gb;
        let rate = if r.ms > 0.0 { gb / (r.ms * 1e-3) } else { 0.0 };
        let ceiling = if r.gemm {
            "GEMM".to_string()
        } else {
            format!("{:.0} %", 100.0 * rate / COPY_GBPS)
        };
        writeln!(
            md,
            "| `{}` | {} | {:.3} | {:.1} % | {:.2} | {:.0} | {} |",
            r.kernel,
            r.calls,
            r.ms,
            100.0 * r.ms / first.kernels_ms.max(1e-12),
            gb,
            rate,
            ceiling
        )?;
    }
    if kernels.len() > SHOWN {
        let rest: f64 = kernels.iter().skip(SHOWN).map(|r| r.ms).sum();
        writeln!(
            md,
            "| {} other kernels | | {rest:.3} | {:.1} % | | | |",
            kernels.len() - SHOWN,
            100.0 * rest / first.kernels_ms.max(1e-12)
        )?;
    }
    md.push('\n');
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(kernel: &str, ms: f64, gb: f64, gemm: bool) -> KernelRecord {
        serde_json::from_str(&format!(
            r#"{{"bench":"kernels","size":"xl","dtype":"bf16","batch":8,"seq":128,
            "graph_kernels":3000,"step_ms":50.0,"kernels_ms":40.0,"gemm_ms":25.0,
            "kernel":"{kernel}","calls":96,"ms":{ms},"read_gb":{gb},"write_gb":0.0,"gemm":{gemm}}}"#
        ))
        .unwrap()
    }

    #[test]
    fn the_table_rates_memory_kernels_against_the_copy_ceiling_and_gemms_against_the_peak() {
        let recs = vec![
            rec("(all)", 40.0, 0.0, false),
            rec("sm90_xmma_gemm_bf16", 25.0, 10.0, true),
            rec("adamw_f32_gbf16_v4", 10.0, 21.5, false),
        ];
        let mut md = String::new();
        section(&mut md, &recs, &[]).unwrap();
        assert!(md.contains("runs 3000 kernels"), "{md}");
        // 21.5 GB in 10 ms = 2150 GB/s = 50 % of 4.3 TB/s.
        assert!(
            md.contains("| `adamw_f32_gbf16_v4` | 96 | 10.000 | 25.0 % | 21.50 | 2150 | 50 % |"),
            "{md}"
        );
        assert!(
            md.contains("| `sm90_xmma_gemm_bf16` | 96 | 25.000 | 62.5 % | 10.00 | 400 | GEMM |"),
            "{md}"
        );
        assert!(md.contains("% of the 989 TFLOP/s dense bf16 peak"), "{md}");
        assert!(!md.contains("`(all)`"), "{md}");
    }
}
